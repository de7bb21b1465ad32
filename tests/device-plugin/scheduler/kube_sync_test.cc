// The scheduler as a cache of the API server, against the API server stand-in (tests/support/): the faults
// the real kube-apiserver cannot produce on demand (a cut watch, 410 Gone, a restart with a new history,
// garbage on the stream) leave the scheduler's view equal to what the API server holds, and nothing
// crashes. The whole loop on the real kube-apiserver is tests/kube/kube_test.cc.
//
// Expected values: the pods and Nodes the test put into the stand-in (a pod holds the chips of its
// `ascend.huawei.com/chips` annotation on its node while it exists and has not finished).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ascend/common/kube_client.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/scheduler/commands.h"
#include "ascend/scheduler/kube_records.h"
#include "ascend/scheduler/kube_sync.h"
#include "ascend/scheduler/server.h"
#include "browser.h"
#include "dra_objects.h"
#include "extender_util.h"
#include "fake_apiserver.h"
#include "guarded_capture.h"
#include "run_command.h"

namespace ascend::scheduler {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using ascend::testing::FakeApiServer;

bool wait_for(const std::function<bool()>& f, std::chrono::milliseconds timeout = 10s) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

constexpr int kNodes = 4;

class Cached {
 public:
  explicit Cached(FakeApiServer& api) {
    ServeOptions o;
    o.listen = "127.0.0.1:0";
    o.extender_listen = "127.0.0.1:0";
    o.instance = "test";
    kube::Config cfg;
    cfg.server = api.url();
    auto s = Server::create(o, testing::small_cluster(kNodes), nullptr, std::make_shared<kube::Client>(cfg));
    EXPECT_TRUE(s.ok()) << s.error().message();
    server = std::move(*s);
    thread = std::thread([this] { (void)server->run(); });
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    extender = std::make_unique<httplib::Client>("127.0.0.1", server->extender_port());
  }
  ~Cached() {
    server->stop();
    thread.join();
  }
  bool ready() {
    auto r = client->Get("/readyz");
    return r && r->status == 200;
  }
  json view() {
    auto r = client->Get("/v1/cluster");
    return r && r->status == 200 ? json::parse(r->body) : json();
  }
  json post(httplib::Client& c, const std::string& path, const json& body) {
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << path << (r ? r->body : "");
    return r ? json::parse(r->body, nullptr, false) : json();
  }

  std::unique_ptr<Server> server;
  std::thread thread;
  std::unique_ptr<httplib::Client> client, extender;
};

// "node chip" -> pod name, for every chip a pod holds in the scheduler's view.
std::map<std::string, std::string> held(const json& view) {
  std::map<std::string, std::string> out;
  if (!view.is_object()) return out;
  for (const auto& n : view["nodes"]) {
    for (const auto& c : n["chips"]) {
      if (c.contains("pod") && !c["pod"].get<std::string>().empty())
        out[n["name"].get<std::string>() + " " + c["phy"].dump()] = c["pod"];
    }
  }
  return out;
}

// The same from the API server: what each existing, unfinished pod's annotation says.
std::map<std::string, std::string> held_in_api(FakeApiServer& api) {
  std::map<std::string, std::string> out;
  const json pods = api.list("/api/v1/pods");  // kept: a range over a temporary's member would dangle
  for (const auto& p : pods["items"]) {
    auto a = read_api_pod(p);
    if (!a.ok() || a->node.empty() || a->chips.empty() || a->finished()) continue;
    // The view names a job's pod by its name, a pod without a job by namespace/name.
    for (int c : a->chips)
      out[a->node + " " + std::to_string(c)] = a->info.job ? a->info.name : a->info.key();
  }
  return out;
}

void put_nodes(FakeApiServer& api) {
  for (int i = 0; i < kNodes; ++i) {
    api.create(
        "/api/v1/nodes",
        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-" + std::to_string(i)}}}});
  }
}

// A pod bound by someone (another replica): our annotation and its node.
json bound_pod(const std::string& name, const std::string& node, const std::string& chips) {
  json p = testing::plain_pod(name, 2);
  p["metadata"].erase("uid");
  p["metadata"]["annotations"] = {{kChipsAnnotation, chips}};
  p["spec"]["nodeName"] = node;
  return p;
}

TEST(KubeSync, AJobThroughTheVerbsLeavesItsRecordsInTheApiServerAndDeletingItsPodsFreesTheChips) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); })) << "the cache never synced";
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back("node-" + std::to_string(i));
  std::map<int, std::string> where;
  for (int i = 0; i < 4; ++i) {
    json pod =
        api.create("/api/v1/namespaces/default/pods", testing::job_pod("train", i, 4, "tp=4,pp=2,dp=2"));
    json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", names}});
    ASSERT_EQ(r["NodeNames"].size(), 1u) << r.dump();
    where[i] = r["NodeNames"][0];
    json b = s.post(*s.extender, "/bind",
                    {{"PodName", pod["metadata"]["name"]},
                     {"PodNamespace", "default"},
                     {"PodUID", pod["metadata"]["uid"]},
                     {"Node", where[i]}});
    EXPECT_EQ(b.value("Error", ""), "") << b.dump();
  }
  // The API server has the Binding (nodeName), the annotations, and the job's ConfigMap, completed.
  for (int i = 0; i < 4; ++i) {
    json p = api.get("/api/v1/namespaces/default/pods/train-" + std::to_string(i));
    EXPECT_EQ(p["spec"]["nodeName"], where[i]);
    EXPECT_EQ(p["metadata"]["annotations"][kRankStartAnnotation], std::to_string(i * 4));
    EXPECT_EQ(parse_chips(p["metadata"]["annotations"][kChipsAnnotation].get<std::string>())->size(), 4u);
  }
  json cm;
  ASSERT_TRUE(wait_for([&] {
    cm = api.get("/api/v1/namespaces/default/configmaps/ascend-job-train");
    return cm.is_object() &&
           json::parse(cm["data"][kRankTableKey].get<std::string>())["status"] == "completed";
  })) << cm.dump();
  EXPECT_EQ(cm["metadata"]["labels"][kJobLabel], "train");
  EXPECT_EQ(held(s.view()), held_in_api(api)) << api.list("/api/v1/pods").dump().substr(0, 3000);
  // Deleting the pods frees every chip and removes the ConfigMap.
  for (int i = 0; i < 4; ++i) api.remove("/api/v1/namespaces/default/pods/train-" + std::to_string(i));
  EXPECT_TRUE(wait_for([&] { return held(s.view()).empty(); })) << s.view().dump().substr(0, 2000);
  // The Events, as kube-scheduler's own (events.k8s.io/v1, about the pod, from our controller).
  auto reasons = [&] {
    std::multiset<std::string> out;
    const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
    for (const auto& e : events["items"]) {
      if (e.value("reportingController", "") == kController) out.insert(e.value("reason", ""));
    }
    return out;
  };
  EXPECT_TRUE(wait_for([&] { return reasons().count("AscendReleased") == 4; }))
      << api.list("/apis/events.k8s.io/v1/namespaces/default/events").dump().substr(0, 3000);
  EXPECT_EQ(reasons().count("AscendPlaced"), 1u) << "one placement, told to the pod that caused it";
  const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
  for (const auto& e : events["items"]) {
    if (e.value("reason", "") != "AscendPlaced") continue;
    EXPECT_EQ(e["regarding"]["kind"], "Pod");
    EXPECT_EQ(e["regarding"]["name"], "train-0");
    EXPECT_EQ(e["type"], "Normal");
    EXPECT_NE(e["note"].get<std::string>().find(
                  "job train (4 pods x 4 chips, tp=4 pp=2 dp=2) placed on node-0,node-1"),
              std::string::npos)
        << e.dump();
  }
  EXPECT_TRUE(
      wait_for([&] { return api.get("/api/v1/namespaces/default/configmaps/ascend-job-train").is_null(); }));
}

TEST(KubeSync, APodThatCannotBePlacedGetsOneWarningEventPerReasonAndAPodNotInTheApiNone) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  std::vector<std::string> names = {"node-0", "node-1"};
  // 9 chips on one pod: no node has them.
  json pod = api.create("/api/v1/namespaces/default/pods", testing::plain_pod("too-big", 9));
  for (int i = 0; i < 3; ++i) {
    json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", names}});
    EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
  }
  auto warnings = [&](const std::string& pod_name) {
    int n = 0;
    const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
    for (const auto& e : events["items"]) {
      n += e.value("reason", "") == "AscendPlacementFailed" && e["type"] == "Warning" &&
                   e["regarding"]["name"] == pod_name
               ? 1
               : 0;
    }
    return n;
  };
  // The Events go out in order from one queue: once a later pod's warning is there, every warning the three
  // filters of the first could have made is there too (no clock involved).
  json later = api.create("/api/v1/namespaces/default/pods", testing::plain_pod("too-big-later", 9));
  s.post(*s.extender, "/filter", {{"Pod", later}, {"NodeNames", names}});
  EXPECT_TRUE(wait_for([&] { return warnings("too-big-later") == 1; }));
  EXPECT_EQ(warnings("too-big"), 1) << "one Warning for one reason, not one per filter";
  // A pod the API server does not have passes nowhere and reserves nothing.
  json ghost = testing::plain_pod("ghost", 1);
  json r = s.post(*s.extender, "/filter", {{"Pod", ghost}, {"NodeNames", names}});
  EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
  EXPECT_NE(r.dump().find("is not in the API server"), std::string::npos) << r.dump();
  json b = s.post(*s.extender, "/bind",
                  {{"PodName", "ghost"},
                   {"PodNamespace", "default"},
                   {"PodUID", ghost["metadata"]["uid"]},
                   {"Node", "node-0"}});
  EXPECT_NE(b.value("Error", "").find("is not in the API server"), std::string::npos) << b.dump();
  EXPECT_TRUE(held(s.view()).empty());
}

// ---- chip faults under a running job (issue 23: the scheduler's recovery) --------------------------------

// A 4-pod job (tp=4, pp=2, dp=2, 4 chips a pod) with `recovery` and `max_restarts`, filtered and bound.
std::map<int, std::pair<std::string, std::vector<int>>> run_job(FakeApiServer& api, Cached& s,
                                                                const std::string& job,
                                                                const std::string& recovery,
                                                                int max_restarts) {
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back("node-" + std::to_string(i));
  std::map<int, std::pair<std::string, std::vector<int>>> where;
  for (int i = 0; i < 4; ++i) {
    json p = testing::job_pod(job, i, 4, "tp=4,pp=2,dp=2");
    p["metadata"]["annotations"][kRecoveryAnnotation] = recovery;
    p["metadata"]["annotations"][kMaxRestartsAnnotation] = std::to_string(max_restarts);
    json pod = api.create("/api/v1/namespaces/default/pods", p);
    json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", names}});
    EXPECT_EQ(r["NodeNames"].size(), 1u) << r.dump();
    if (r["NodeNames"].empty()) return where;
    s.post(*s.extender, "/bind",
           {{"PodName", pod["metadata"]["name"]},
            {"PodNamespace", "default"},
            {"PodUID", pod["metadata"]["uid"]},
            {"Node", r["NodeNames"][0]}});
    json bound = api.get("/api/v1/namespaces/default/pods/" + job + "-" + std::to_string(i));
    where[i] = {r["NodeNames"][0], *parse_chips(bound["metadata"]["annotations"][kChipsAnnotation])};
  }
  return where;
}

// The device plugin of `node` reports a fault `code` of `level` on chip `bad` (MindCluster's device
// ConfigMap): PreSeparateNPU and above make it Unhealthy (as our plugin does), milder levels keep it healthy.
// `isolated`: its ManuallySeparateNPU.
void fault_chip(FakeApiServer& api, const std::string& node, int bad, const std::string& code,
                const std::string& level, const std::vector<int>& isolated = {}) {
  deviceinfo::NodeDevices d;
  d.node = node;
  d.resource = "huawei.com/Ascend910";
  bool sick = level == "SeparateNPU" || level == "PreSeparateNPU";
  for (int c = 0; c < 8; ++c) (c == bad && sick ? d.unhealthy : d.healthy).push_back(c);
  if (bad >= 0) d.faults.push_back({bad, {code}, level, false});
  d.manually_separated = isolated;
  const std::string path = std::string("/api/v1/namespaces/") + deviceinfo::kNamespace + "/configmaps";
  json cm = deviceinfo::to_configmap(d);
  if (api.get(path + "/" + deviceinfo::configmap_name(node)).is_null()) {
    api.create(path, cm);
  } else {
    api.update(path + "/" + deviceinfo::configmap_name(node), cm);
  }
}

// A SeparateNPU fault (the code from our plugin's fault table, device-plugin/plugin/faults/fault-codes.yaml).
void fail_chip(FakeApiServer& api, const std::string& node, int bad) {
  fault_chip(api, node, bad, "80E18402", "SeparateNPU");
}

bool pod_there(FakeApiServer& api, const std::string& name) {
  return !api.get("/api/v1/namespaces/default/pods/" + name).is_null();
}

std::multiset<std::string> reasons_of(FakeApiServer& api, const std::string& pod) {
  std::multiset<std::string> out;
  const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
  for (const auto& e : events["items"]) {
    if (e["regarding"]["name"] == pod) out.insert(e.value("reason", ""));
  }
  return out;
}

TEST(KubeRecovery, PodRecoveryEvictsThePodOnTheFailedChipAndItComesBackOnHealthyChipsAroundTheOthers) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  auto where = run_job(api, s, "ft", "pod", 3);
  ASSERT_EQ(where.size(), 4u);
  const auto [node2, chips2] = where[2];
  std::uint64_t v0 = record_version(api.get("/api/v1/namespaces/default/configmaps/ascend-job-ft"));
  fail_chip(api, node2, chips2[1]);
  // Pod 2 is evicted (the Eviction API; the stand-in deletes it), the others stay.
  EXPECT_TRUE(wait_for([&] { return !pod_there(api, "ft-2"); })) << "pod 2 was not evicted";
  for (int i : {0, 1, 3}) EXPECT_TRUE(pod_there(api, "ft-" + std::to_string(i)));
  EXPECT_TRUE(wait_for([&] {
    auto r = reasons_of(api, "ft-2");
    return r.count("AscendFault") == 1 && r.count("AscendRescheduling") == 1;
  }));
  // Its owner makes it again (the test plays the Indexed Job's controller): same index, so the same ranks.
  json again = testing::job_pod("ft", 2, 4, "tp=4,pp=2,dp=2");
  again["metadata"]["annotations"][kRecoveryAnnotation] = "pod";
  json pod = api.create("/api/v1/namespaces/default/pods", again);
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back("node-" + std::to_string(i));
  json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", names}});
  ASSERT_EQ(r["NodeNames"].size(), 1u) << r.dump();
  json b = s.post(*s.extender, "/bind",
                  {{"PodName", "ft-2"},
                   {"PodNamespace", "default"},
                   {"PodUID", pod["metadata"]["uid"]},
                   {"Node", r["NodeNames"][0]}});
  ASSERT_EQ(b.value("Error", ""), "") << b.dump();
  json p2 = api.get("/api/v1/namespaces/default/pods/ft-2");
  auto new_chips = *parse_chips(p2["metadata"]["annotations"][kChipsAnnotation]);
  EXPECT_EQ(p2["metadata"]["annotations"][kRankStartAnnotation], "8") << "its ranks are its index's";
  if (r["NodeNames"][0] == node2) {
    EXPECT_EQ(std::count(new_chips.begin(), new_chips.end(), chips2[1]), 0) << "not on the failed chip";
  }
  // The others kept their chips; the record counts the restart, and its rank table is complete again.
  for (int i : {0, 1, 3}) {
    json p = api.get("/api/v1/namespaces/default/pods/ft-" + std::to_string(i));
    EXPECT_EQ(*parse_chips(p["metadata"]["annotations"][kChipsAnnotation]), where[i].second) << i;
  }
  json cm;
  ASSERT_TRUE(wait_for([&] {
    cm = api.get("/api/v1/namespaces/default/configmaps/ascend-job-ft");
    return cm.is_object() &&
           json::parse(cm["data"][kRankTableKey].get<std::string>())["status"] == "completed" &&
           record_version(cm) > v0;
  })) << cm.dump();
  EXPECT_EQ((*record_of(cm))["restarts"], 1);
}

// ---- the job's state, the rank table the survivors see, isolation, metrics (issue 23) ------------------

json job_status(Cached& s, const std::string& job) {
  auto r = s.client->Get(("/v1/jobs/default/" + job).c_str());
  return r && r->status == 200 ? json::parse(r->body) : json();
}

std::string metrics(Cached& s) {
  auto r = s.client->Get("/metrics");
  return r && r->status == 200 ? r->body : "";
}

// rank id -> "server device_id device_ip" from a job ConfigMap's hccl.json.
std::map<std::string, std::string> ranks_of(const json& cm) {
  std::map<std::string, std::string> out;
  json rt = json::parse(cm["data"][kRankTableKey].get<std::string>());
  for (const auto& srv : rt["server_list"]) {
    for (const auto& d : srv["device"]) {
      out[d["rank_id"].get<std::string>()] = srv["server_id"].get<std::string>() + " " +
                                             d["device_id"].get<std::string>() + " " +
                                             d.value("device_ip", "");
    }
  }
  return out;
}

std::vector<std::string> all_nodes() {
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back("node-" + std::to_string(i));
  return names;
}

// The test plays the job's controller: pod `i` of `job` made again, filtered and bound; its node.
std::string make_again(FakeApiServer& api, Cached& s, const std::string& job, int i,
                       const std::string& mode) {
  json again = testing::job_pod(job, i, 4, "tp=4,pp=2,dp=2");
  again["metadata"]["annotations"][kRecoveryAnnotation] = mode;
  json pod = api.create("/api/v1/namespaces/default/pods", again);
  json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", all_nodes()}});
  EXPECT_EQ(r["NodeNames"].size(), 1u) << r.dump();
  if (r["NodeNames"].size() != 1) return "";
  json b = s.post(*s.extender, "/bind",
                  {{"PodName", pod["metadata"]["name"]},
                   {"PodNamespace", "default"},
                   {"PodUID", pod["metadata"]["uid"]},
                   {"Node", r["NodeNames"][0]}});
  EXPECT_EQ(b.value("Error", ""), "") << b.dump();
  return r["NodeNames"][0];
}

// The pod watch lags behind the binds (the real API server serves watches from its cache): the job's
// ConfigMap comes back first and its reconcile finds the scheduler holding chips for pods its cache has not
// seen. Not in the cache is not gone: it asks the API server, which has them, and nothing is released.
TEST(KubeSync, PodsBoundBeforeTheWatchBringsThemKeepTheirChipsWhenTheJobsConfigMapComesFirst) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  api.hold_watches("pods", true);
  for (int i = 0; i < 4; ++i) {
    json pod = api.create("/api/v1/namespaces/default/pods", testing::job_pod("lag", i, 4, "tp=4,pp=2,dp=2"));
    json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", all_nodes()}});
    ASSERT_EQ(r["NodeNames"].size(), 1u) << r.dump();
    json b = s.post(*s.extender, "/bind",
                    {{"PodName", pod["metadata"]["name"]},
                     {"PodNamespace", "default"},
                     {"PodUID", pod["metadata"]["uid"]},
                     {"Node", r["NodeNames"][0]}});
    ASSERT_EQ(b.value("Error", ""), "") << b.dump();
  }
  // The reconcile of the job's ConfigMap asked the API server about the pods its cache lacks.
  auto asked = [&] {
    for (const auto& r : api.requests()) {
      if (r.method == "GET" && r.path == "/api/v1/namespaces/default/pods/lag-3") return true;
    }
    return false;
  };
  ASSERT_TRUE(wait_for(asked)) << "the job's ConfigMap never reached its reconcile";
  EXPECT_EQ(held(s.view()).size(), 16u) << s.view().dump().substr(0, 2000);
  EXPECT_EQ(held(s.view()), held_in_api(api));
  EXPECT_EQ(job_status(s, "lag")["state"], "Running");
  api.hold_watches("pods", false);
  // The pods arrive, then one is deleted: the watch brings events in order, so once its release is told,
  // the cache has seen every pod, and that release is the only one there was.
  api.remove("/api/v1/namespaces/default/pods/lag-0");
  auto released = [&] {
    std::vector<std::string> out;
    const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
    for (const auto& e : events["items"]) {
      if (e.value("reason", "") == "AscendReleased") out.push_back(e["regarding"]["name"]);
    }
    return out;
  };
  ASSERT_TRUE(wait_for([&] { return !released().empty(); }));
  EXPECT_EQ(released(), std::vector<std::string>{"lag-0"});
  EXPECT_EQ(held(s.view()).size(), 12u);
  EXPECT_EQ(held(s.view()), held_in_api(api));
}

TEST(KubeRecovery, TheSurvivorsRankTableIsRewrittenWithTheirRanksUnchangedAndTheJobGoesRecoveringToRunning) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  auto where = run_job(api, s, "rt", "pod", 3);
  ASSERT_EQ(where.size(), 4u);
  const std::string cm_path = "/api/v1/namespaces/default/configmaps/ascend-job-rt";
  json cm0;
  ASSERT_TRUE(wait_for([&] {
    cm0 = api.get(cm_path);
    return cm0.is_object() &&
           json::parse(cm0["data"][kRankTableKey].get<std::string>())["status"] == "completed";
  }));
  EXPECT_EQ(job_status(s, "rt")["state"], "Running");
  const double cost0 = job_status(s, "rt")["cost"]["total"].get<double>();
  EXPECT_FALSE(job_status(s, "rt").contains("cost_before_fault")) << "no recovery yet";
  const auto before = ranks_of(cm0);
  ASSERT_EQ(before.size(), 16u);
  const auto [node2, chips2] = where[2];
  fail_chip(api, node2, chips2[3]);
  ASSERT_TRUE(wait_for([&] { return !pod_there(api, "rt-2"); }));
  json st = job_status(s, "rt");
  EXPECT_EQ(st["state"], "Recovering");
  EXPECT_EQ(st["restarts"], 1);
  EXPECT_NE(st["why"].get<std::string>().find("(SeparateNPU 80E18402)"), std::string::npos) << st.dump();
  ASSERT_EQ(st["faults"].size(), 1u);
  EXPECT_EQ(st["faults"][0]["node"], node2);
  EXPECT_EQ(st["faults"][0]["chips"], json::array({chips2[3]}));
  const std::string node_again = make_again(api, s, "rt", 2, "pod");
  ASSERT_FALSE(node_again.empty());
  json cm1;
  ASSERT_TRUE(wait_for([&] {
    cm1 = api.get(cm_path);
    return record_version(cm1) > record_version(cm0) &&
           json::parse(cm1["data"][kRankTableKey].get<std::string>())["status"] == "completed";
  }));
  const auto after = ranks_of(cm1);
  ASSERT_EQ(after.size(), 16u);
  json p2 = api.get("/api/v1/namespaces/default/pods/rt-2");
  auto new_chips = *parse_chips(p2["metadata"]["annotations"][kChipsAnnotation]);
  if (node_again == node2) {
    EXPECT_EQ(std::count(new_chips.begin(), new_chips.end(), chips2[3]), 0);
  }
  std::set<std::string> pod2_devices;
  for (int r = 0; r < 16; ++r) {
    const std::string k = std::to_string(r);
    if (r / 4 != 2) {
      EXPECT_EQ(after.at(k), before.at(k)) << "rank " << r << " of a surviving pod is unchanged";
    } else {
      pod2_devices.insert(after.at(k).substr(0, after.at(k).rfind(' ')));
    }
  }
  std::set<std::string> want;  // server_id is the node's name, device_id the chip's physical id
  for (int c : new_chips) want.insert(node_again + " " + std::to_string(c));
  EXPECT_EQ(pod2_devices, want) << "ranks 8-11 name pod 2's new chips";
  EXPECT_TRUE(wait_for([&] { return job_status(s, "rt")["state"] == "Running"; }));
  // The new placement's cost is reported against the one the fault made the job leave: in its view, in its
  // record (a second replica sees it) and in an Event on the pod that made it whole.
  json done = job_status(s, "rt");
  EXPECT_DOUBLE_EQ(done["cost_before_fault"].get<double>(), cost0) << done.dump();
  EXPECT_DOUBLE_EQ(done["cost_after_recovery"].get<double>(), done["cost"]["total"].get<double>());
  json rec;
  ASSERT_TRUE(wait_for([&] {
    auto r = record_of(api.get(cm_path));
    if (!r || !r->contains("cost_after_recovery") || (*r)["cost_after_recovery"].get<double>() < 0)
      return false;
    rec = *r;
    return true;
  }));
  EXPECT_DOUBLE_EQ(rec["cost_before_fault"].get<double>(), cost0);
  std::string note;
  ASSERT_TRUE(wait_for([&] {
    const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
    for (const auto& e : events["items"]) {
      if (e.value("reason", "") == "AscendRecovered" && e["regarding"]["name"] == "rt-2")
        note = e.value("note", "");
    }
    return !note.empty();
  })) << "no AscendRecovered Event on the pod that completed the job";
  EXPECT_NE(note.find(fmt::format("{:.4g} s before the fault", cost0)), std::string::npos) << note;
  EXPECT_NE(note.find(fmt::format("cost {:.4g} s,", done["cost"]["total"].get<double>())), std::string::npos)
      << note;
  EXPECT_NE(note.find("after restart 1 (pod recovery"), std::string::npos) << note;
  const std::string m = metrics(s);
  EXPECT_NE(m.find("ascend_scheduler_chip_faults_total{level=\"SeparateNPU\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("ascend_scheduler_recovery_actions_total{action=\"evicted\"} 1"), std::string::npos);
  EXPECT_NE(m.find("ascend_scheduler_recovery_actions_total{action=\"restarted\"} 1"), std::string::npos);
  EXPECT_NE(m.find("ascend_scheduler_fault_to_rebound_seconds_count 1"), std::string::npos);
  EXPECT_NE(m.find("ascend_scheduler_jobs{state=\"running\"} 1"), std::string::npos);
}

TEST(KubeRecovery, JobRecoveryBringsTheWholeJobBackOnItsOldNodesAndChips) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  auto where = run_job(api, s, "back", "job", 3);
  ASSERT_EQ(where.size(), 4u);
  fail_chip(api, where[1].first, where[1].second[0]);
  ASSERT_TRUE(wait_for([&] {
    for (int i = 0; i < 4; ++i) {
      if (pod_there(api, "back-" + std::to_string(i))) return false;
    }
    return true;
  }));
  ASSERT_TRUE(wait_for([&] { return held(s.view()).empty(); }));
  EXPECT_EQ(job_status(s, "back")["state"], "Recovering") << "the record waits for the pods";
  for (int i : {1, 0, 2, 3}) {  // the faulted pod first
    std::string n = make_again(api, s, "back", i, "job");
    json p = api.get("/api/v1/namespaces/default/pods/back-" + std::to_string(i));
    auto chips = *parse_chips(p["metadata"]["annotations"][kChipsAnnotation]);
    if (i != 1) {
      EXPECT_EQ(n, where[i].first) << "pod " << i << " is back on its node";
      EXPECT_EQ(chips, where[i].second) << "pod " << i << " has its chips again";
    } else if (n == where[1].first) {
      EXPECT_EQ(std::count(chips.begin(), chips.end(), where[1].second[0]), 0) << "not on the failed chip";
    }
  }
  EXPECT_TRUE(wait_for([&] { return job_status(s, "back")["state"] == "Running"; }));
  EXPECT_EQ(job_status(s, "back")["restarts"], 1);
}

TEST(KubeRecovery, AMildFaultEvictsNobodyAndSaysSoARestartNpuFaultOnAHealthyChipEvicts) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  auto where = run_job(api, s, "mild", "pod", 3);
  ASSERT_EQ(where.size(), 4u);
  // RestartRequest (80C98008): the chip stays in service; the pod is told, nobody is evicted.
  fault_chip(api, where[0].first, where[0].second[1], "80C98008", "RestartRequest");
  ASSERT_TRUE(wait_for([&] { return reasons_of(api, "mild-0").count("AscendFault") == 1; }));
  const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
  bool said = false;
  for (const auto& e : events["items"]) {
    if (e["regarding"]["name"] == "mild-0" && e["reason"] == "AscendFault")
      said = e["note"].get<std::string>().find("nothing is evicted") != std::string::npos &&
             e["note"].get<std::string>().find("RestartRequest") != std::string::npos;
  }
  EXPECT_TRUE(said) << events.dump();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(pod_there(api, "mild-" + std::to_string(i)));
  // The cache sees the pods run through its watch: Running, and the fault does not change that.
  EXPECT_TRUE(wait_for([&] { return job_status(s, "mild")["state"] == "Running"; }, 30s))
      << job_status(s, "mild");
  EXPECT_NE(metrics(s).find("ascend_scheduler_chip_faults_total{level=\"RestartRequest\"} 1"),
            std::string::npos);
  // The same ConfigMap written again (the plugin republishes): not a new fault.
  fault_chip(api, where[0].first, where[0].second[1], "80C98008", "RestartRequest");
  std::this_thread::sleep_for(300ms);  // nothing must happen: give the watch the time a change would take
  EXPECT_EQ(reasons_of(api, "mild-0").count("AscendFault"), 1u);
  // RestartNPU (8C03A000) on pod 3's chip: the plugin keeps the chip healthy (it is reset), but the work on
  // it stops: pod 3 is evicted.
  fault_chip(api, where[3].first, where[3].second[0], "8C03A000", "RestartNPU");
  EXPECT_TRUE(wait_for([&] { return !pod_there(api, "mild-3"); }));
  EXPECT_TRUE(pod_there(api, "mild-0"));
}

// What an operator sees during a recovery (issue 23): the dashboard, in a real browser, lists the job as
// Recovering (its row class, the summary's count) and outlines the chip an operator isolated.
TEST(KubeRecovery, TheDashboardShowsARecoveringJobAndAnIsolatedChipInARealBrowser) {
  if (ascend::testing::run_command({"chromium", "--version"}).exit_code != 0) {
    FAIL() << "chromium is not installed (scripts/deps installs it)";
  }
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  auto where = run_job(api, s, "dash", "pod", 3);
  ASSERT_EQ(where.size(), 4u);
  const auto [node2, chips2] = where[2];
  // Pod 2's chip fails (it is evicted: Recovering); on a node the job does not use, chip 6 is isolated.
  std::string spare;
  for (int i = 0; i < kNodes && spare.empty(); ++i) {
    const std::string n = "node-" + std::to_string(i);
    bool used = false;
    for (const auto& [pod, w] : where) used = used || w.first == n;
    if (!used) spare = n;
  }
  ASSERT_FALSE(spare.empty());
  fail_chip(api, node2, chips2[0]);
  fault_chip(api, spare, -1, "", "", {6});
  ASSERT_TRUE(wait_for([&] { return job_status(s, "dash")["state"] == "Recovering"; }));
  ASSERT_TRUE(wait_for(
      [&] { return metrics(s).find("ascend_scheduler_chips{state=\"isolated\"} 1") != std::string::npos; }));
  std::string artifacts = std::string(ASCEND_BIN_DIR) + "/../tests/artifacts";
  std::filesystem::create_directories(artifacts);
  const std::string profile = artifacts + "/chromium-profile-recovery";
  const std::string url = "http://127.0.0.1:" + std::to_string(s.server->port()) + "/";
  auto dom = ascend::testing::run_command(ascend::testing::chromium(profile, {"--dump-dom", url}));
  std::filesystem::remove_all(profile);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  const std::string& html = dom.out;
  EXPECT_NE(html.find("data-ready=\"1\""), std::string::npos) << "the page's script ran and rendered";
  EXPECT_EQ(ascend::testing::count_matches(html, R"(<tr class="job Recovering" data-job="default/dash">)"), 1)
      << html;
  EXPECT_NE(html.find("unhealthy (1 isolated); 1 jobs, 1 recovering"), std::string::npos) << html;
  EXPECT_EQ(ascend::testing::count_matches(html, R"(class="chip [a-z ]*isolated" data-phy="6")"), 1) << html;
}

TEST(KubeRecovery, AFaultOnAFreeChipEvictsNothing) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  auto where = run_job(api, s, "calm", "job", 3);
  ASSERT_EQ(where.size(), 4u);
  // A chip of a node no pod of the job is on, or a free one beside them.
  std::string node;
  int chip = -1;
  auto h = held(s.view());
  for (int n = 0; n < kNodes && chip < 0; ++n) {
    for (int c = 0; c < 8 && chip < 0; ++c) {
      if (h.count("node-" + std::to_string(n) + " " + std::to_string(c)) == 0) {
        node = "node-" + std::to_string(n);
        chip = c;
      }
    }
  }
  ASSERT_GE(chip, 0);
  fail_chip(api, node, chip);
  ASSERT_TRUE(wait_for([&] {
    const json v = s.view();  // kept: a range over a temporary's member would dangle
    for (const auto& n : v["nodes"]) {
      if (n["name"] == node && n["chips"][chip]["unhealthy"] == true) return true;
    }
    return false;
  }));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(pod_there(api, "calm-" + std::to_string(i)));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(reasons_of(api, "calm-" + std::to_string(i)).count("AscendFault"), 0u);
  EXPECT_EQ(job_status(s, "calm")["state"], "Running");
  EXPECT_EQ(job_status(s, "calm")["restarts"], 0);
}

TEST(KubeRecovery, AnIsolatedChipStaysOutOfEveryPlacementUntilClearedWithTheCli) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  fault_chip(api, "node-1", -1, "", "");  // node-1's plugin reports every chip healthy
  IsolateOptions o;
  o.kube_api = api.url();
  o.targets = {"node-1/3", "node-1/5"};
  std::ostringstream out, err;
  ASSERT_EQ(run_isolate(o, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("ManuallySeparateNPU is now \"Ascend910-3,Ascend910-5\""), std::string::npos)
      << out.str();
  auto chip_of = [&](int c) {
    const json v = s.view();  // kept: a range over a temporary's member would dangle
    for (const auto& n : v["nodes"]) {
      if (n["name"] == "node-1") return n["chips"][c];
    }
    return json::object();
  };
  ASSERT_TRUE(
      wait_for([&] { return chip_of(3).value("isolated", false) && chip_of(5).value("isolated", false); }));
  EXPECT_EQ(s.view()["chips"]["isolated"], 2);
  // Every placement keeps off them: fill the cluster with 8-chip pods; node-1 has 6 usable chips only.
  std::set<std::string> nodes_used;
  for (int i = 0; i < kNodes; ++i) {
    json pod =
        api.create("/api/v1/namespaces/default/pods", testing::plain_pod("big-" + std::to_string(i), 8));
    json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", all_nodes()}});
    for (const auto& n : r["NodeNames"]) nodes_used.insert(n);
  }
  EXPECT_EQ(nodes_used.count("node-1"), 0u) << "an 8-chip pod never fits node-1 while 2 chips are isolated";
  // Cleared: the chip is offered again (its device plugin also drops it from its isolation).
  o.clear = true;
  o.targets = {"node-1/3"};
  out.str("");
  ASSERT_EQ(run_isolate(o, out, err), 0) << err.str();
  EXPECT_TRUE(
      wait_for([&] { return !chip_of(3).value("isolated", false) && chip_of(5).value("isolated", false); }));
  json cm = api.get(std::string("/api/v1/namespaces/") + deviceinfo::kNamespace + "/configmaps/" +
                    deviceinfo::configmap_name("node-1"));
  EXPECT_EQ(cm["data"][deviceinfo::kManuallySeparateKey], "Ascend910-5");
  // The API server failing: one line naming the node, exit 1, nothing changed.
  api.fail_next(500, 10);
  {
    IsolateOptions f = o;
    f.clear = false;
    f.targets = {"node-1/3"};
    std::ostringstream fo, fe;
    EXPECT_EQ(run_isolate(f, fo, fe), 1);
    EXPECT_NE(fe.str().find("node-1: "), std::string::npos) << fe.str();
  }
  api.fail_next(500, 0);
  // Bad input: one clear line each, exit 2.
  for (const auto& [target, says] : std::vector<std::pair<std::string, std::string>>{
           {"node-1", "is not NODE/CHIP"},
           {"node-1/x", "physical id"},
           {"node-1/9", "has no chip 9"},
           {"node-7/0", "has no kube-system/mindx-dl-deviceinfo-node-7"},
           {"Node_1/0", "node"}}) {
    IsolateOptions b = o;
    b.targets = {target};
    std::ostringstream bo, be;
    EXPECT_EQ(run_isolate(b, bo, be), 2) << target;
    EXPECT_NE(be.str().find(says), std::string::npos) << target << ": " << be.str();
  }
}

TEST(KubeRecovery, AFaultWhileTheSchedulerIsDownIsActedOnOnceItIsBack) {
  FakeApiServer api;
  put_nodes(api);
  std::map<int, std::pair<std::string, std::vector<int>>> where;
  {
    Cached s(api);
    ASSERT_TRUE(wait_for([&] { return s.ready(); }));
    where = run_job(api, s, "late", "pod", 3);
    ASSERT_EQ(where.size(), 4u);
    ASSERT_TRUE(wait_for(
        [&] { return api.get("/api/v1/namespaces/default/configmaps/ascend-job-late").is_object(); }));
  }
  fail_chip(api, where[1].first, where[1].second[0]);  // nobody is watching
  Cached again(api);
  EXPECT_TRUE(wait_for([&] { return !pod_there(api, "late-1"); })) << "the owed recovery was not done";
  for (int i : {0, 2, 3}) EXPECT_TRUE(pod_there(api, "late-" + std::to_string(i)));
  EXPECT_TRUE(wait_for([&] { return reasons_of(api, "late-1").count("AscendFault") == 1; }));
}

TEST(KubeRecovery, JobRecoveryEvictsEveryPodNoneNobodyAndSpentRestartsNobody) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  // `job`: every pod goes.
  auto where = run_job(api, s, "whole", "job", 3);
  ASSERT_EQ(where.size(), 4u);
  fail_chip(api, where[0].first, where[0].second[0]);
  EXPECT_TRUE(wait_for([&] {
    for (int i = 0; i < 4; ++i) {
      if (pod_there(api, "whole-" + std::to_string(i))) return false;
    }
    return true;
  })) << "job recovery evicts the whole job";
  EXPECT_TRUE(wait_for([&] { return held(s.view()).empty(); }));
}

TEST(KubeRecovery, RecoveryNoneAndSpentRestartsEvictNobodyAndSaySo) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  auto a = run_job(api, s, "keep", "none", 3);
  auto b = run_job(api, s, "spent", "pod", 0);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  // Both jobs' pod 0 lose a chip; neither is evicted; each gets an AscendFault saying why.
  fail_chip(api, a[0].first, a[0].second[0]);
  if (b[0].first != a[0].first) fail_chip(api, b[0].first, b[0].second[0]);
  EXPECT_TRUE(wait_for([&] {
    return reasons_of(api, "keep-0").count("AscendFault") == 1 &&
           reasons_of(api, "spent-0").count("AscendFault") == 1;
  }));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(pod_there(api, "keep-" + std::to_string(i)));
    EXPECT_TRUE(pod_there(api, "spent-" + std::to_string(i)));
  }
  EXPECT_EQ(reasons_of(api, "keep-0").count("AscendRescheduling"), 0u);
  EXPECT_EQ(reasons_of(api, "spent-0").count("AscendRescheduling"), 0u);
  // Spent: the job is Failed (once: one AscendJobFailed); recovery none: it runs on.
  EXPECT_TRUE(wait_for([&] { return reasons_of(api, "spent-0").count("AscendJobFailed") == 1; }));
  EXPECT_EQ(job_status(s, "spent")["state"], "Failed");
  EXPECT_EQ(job_status(s, "keep")["state"], "Running");
  EXPECT_NE(metrics(s).find("ascend_scheduler_recovery_actions_total{action=\"failed\"} 1"),
            std::string::npos);
  // Its pods end: its chips are free, the Failed record stays (the job's pods are not placed again).
  for (int i = 0; i < 4; ++i) api.remove("/api/v1/namespaces/default/pods/spent-" + std::to_string(i));
  EXPECT_TRUE(wait_for([&] {
    for (const auto& [chip, pod] : held(s.view())) {
      if (pod.rfind("spent-", 0) == 0) return false;
    }
    return true;
  })) << "no chip leaks";
  EXPECT_EQ(job_status(s, "spent")["state"], "Failed");
}

TEST(KubeSync, TheViewFollowsTheApiServerThroughCutWatchesGoneHistoryARestartAndGarbage) {
  FakeApiServer api;
  put_nodes(api);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); }));
  int next = 0;
  auto add = [&](int node) {
    std::string name = "p" + std::to_string(next++);
    // Two chips each, on chips 0-7 of the node, in order.
    int first = 2 * ((next - 1) % 4);
    api.create("/api/v1/namespaces/default/pods",
               bound_pod(name, "node-" + std::to_string(node),
                         std::to_string(first) + "," + std::to_string(first + 1)));
    return name;
  };
  auto same = [&] { return wait_for([&] { return held(s.view()) == held_in_api(api); }); };
  std::string a = add(0), b = add(0);
  ASSERT_TRUE(same()) << s.view().dump().substr(0, 2000);

  // A cut watch: what happens meanwhile arrives on the next one.
  api.cut_watches();
  api.remove("/api/v1/namespaces/default/pods/" + a);
  std::string c = add(1);
  EXPECT_TRUE(same()) << "after a cut watch";

  // The history is gone (410): a re-list, whose differences are delivered.
  api.compact();
  api.cut_watches();
  api.remove("/api/v1/namespaces/default/pods/" + b);
  api.compact();
  EXPECT_TRUE(same()) << "after 410 Gone";

  // A restart with a new history.
  api.restart(5000);
  api.patch("/api/v1/namespaces/default/pods/" + c, {{"status", {{"phase", "Succeeded"}}}});
  std::string d = add(2);
  EXPECT_TRUE(same()) << "after a restart of the API server";

  // Garbage and a truncated event on the stream: a re-list, never a wrong cache.
  api.garbage_watches();
  std::string e = add(3);
  EXPECT_TRUE(same()) << "after garbage";
  api.truncate_watches();
  api.remove("/api/v1/namespaces/default/pods/" + d);
  EXPECT_TRUE(same()) << "after a truncated event";
  // Ready again once every informer has re-listed (not ready while a re-list is due).
  EXPECT_TRUE(wait_for([&] { return s.ready(); }));
  // A Node deleted from the API offers nothing; back, it does.
  api.remove("/api/v1/nodes/node-1");
  EXPECT_TRUE(wait_for([&] { return s.view()["nodes"][1].value("absent", false); }));
  api.create("/api/v1/nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}});
  EXPECT_TRUE(wait_for([&] { return !s.view()["nodes"][1].value("absent", false); }));
}

// The scheduler's state through SchedulerAccess; the first `throws` calls throw (a bug in a transition).
class FlakyAccess final : public SchedulerAccess {
 public:
  explicit FlakyAccess(int throws) : sched_(testing::small_cluster(kNodes)), throws_(throws) {}
  void with(const std::function<void(Scheduler&)>& f) override {
    std::lock_guard lock(mu_);
    if (throws_ > 0) {
      --throws_;
      throw std::runtime_error("access bug");
    }
    f(sched_);
  }

 private:
  std::mutex mu_;
  Scheduler sched_;
  int throws_;
};

// The initial sync runs on its own thread: one that throws is logged and tried again, and the cache becomes
// ready once a sync has run.
TEST(KubeSync, AnInitialSyncThatThrowsIsLoggedAndTriedAgainUntilTheCacheIsReady) {
  ascend::testing::GuardedCapture cap;
  FakeApiServer api;
  // Nothing in the API server: no informer's handler asks for the scheduler, the initial sync is the first.
  FlakyAccess access(1);
  kube::Config cfg;
  cfg.server = api.url();
  KubeSync sync(std::make_shared<kube::Client>(cfg), access, {"test"});
  sync.start();
  EXPECT_TRUE(sync.wait_synced(10s)) << "a later sync ran";
  EXPECT_EQ(
      cap.errors_with("initial sync with the API server: internal error: access bug (please report it); "
                      "trying again")
          .size(),
      1U);
  sync.stop();
}

TEST(KubeSync, ANewSchedulerWithNoStateRebuildsTheSameView) {
  FakeApiServer api;
  put_nodes(api);
  json before;
  {
    Cached s(api);
    ASSERT_TRUE(wait_for([&] { return s.ready(); }));
    std::vector<std::string> names;
    for (int i = 0; i < kNodes; ++i) names.push_back("node-" + std::to_string(i));
    // Half a job: pods 0 and 1 filtered and bound, 2 and 3 filtered (reserved) only.
    for (int i = 0; i < 4; ++i) {
      json pod =
          api.create("/api/v1/namespaces/default/pods", testing::job_pod("half", i, 4, "tp=4,pp=2,dp=2"));
      json r = s.post(*s.extender, "/filter", {{"Pod", pod}, {"NodeNames", names}});
      if (i >= 2) continue;
      s.post(*s.extender, "/bind",
             {{"PodName", pod["metadata"]["name"]},
              {"PodNamespace", "default"},
              {"PodUID", pod["metadata"]["uid"]},
              {"Node", r["NodeNames"][0]}});
    }
    ASSERT_TRUE(wait_for(
        [&] { return api.get("/api/v1/namespaces/default/configmaps/ascend-job-half").is_object(); }));
    before = s.view();
  }
  Cached again(api);
  ASSERT_TRUE(wait_for([&] { return again.ready(); }));
  json after = again.view();
  EXPECT_EQ(after["nodes"], before["nodes"]);
  EXPECT_EQ(after["jobs"], before["jobs"]);
}

// ---- DRA: a job whose pods take their chips through ResourceClaims (issue 30) ---------------------------

namespace dra {

const std::string kClaims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";

// A ResourceClaim for `count` chips of the DeviceClass npu.ascend.huawei.com (resource.k8s.io/v1).
json claim(const std::string& name, int count) {
  return ascend::testing::npu_claim(name, count);
}

// What kube-scheduler's PreBind writes: the claim's allocation of `chips` of `node` (our driver's pool is
// the node's name, a chip's device `npu-<phy>`).
void allocate(FakeApiServer& api, const std::string& name, const std::string& node,
              const std::vector<int>& chips) {
  json c = api.get(kClaims + "/" + name);
  json results = json::array();
  for (int phy : chips)
    results.push_back({{"request", "npus"},
                       {"driver", "npu.ascend.huawei.com"},
                       {"pool", node},
                       {"device", "npu-" + std::to_string(phy)}});
  c["status"]["allocation"] = {{"devices", {{"results", results}}}};
  api.update(kClaims + "/" + name, c);
}

// Pod `index` of job `job` (tp=4, dp=2: 2 pods of 4 chips), no NPU resource, its claim named in its spec.
json pod(const std::string& job, int index) {
  json p = testing::job_pod(job, index, 0, "tp=4,pp=1,dp=2", 2);
  p["metadata"].erase("uid");
  p["metadata"]["annotations"]["ascend.huawei.com/pod-index"] = std::to_string(index);
  p["spec"]["resourceClaims"] =
      json::array({{{"name", "npus"}, {"resourceClaimName", job + "-" + std::to_string(index) + "-npus"}}});
  p["spec"]["containers"][0]["resources"] = {{"claims", json::array({{{"name", "npus"}}})}};
  return p;
}

std::vector<int> chips_of(const json& placement_pod) {
  return placement_pod["chips"].get<std::vector<int>>();
}

}  // namespace dra

TEST(KubeSyncDra, AJobUsingClaimsIsPlannedAroundTheClaimedChipsAndHoldsTheChipsItsClaimsWereGiven) {
  FakeApiServer api;
  put_nodes(api);
  // Every chip of node-0 and node-1 is held by a claim of someone else (a pod outside the job).
  for (int n = 0; n < 2; ++n) {
    const std::string name = "other-" + std::to_string(n);
    api.create(dra::kClaims, dra::claim(name, 8));
    dra::allocate(api, name, "node-" + std::to_string(n), {0, 1, 2, 3, 4, 5, 6, 7});
  }
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); })) << "the cache never synced";
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back("node-" + std::to_string(i));
  std::vector<json> pods;
  for (int i = 0; i < 2; ++i) {
    api.create(dra::kClaims, dra::claim("train-" + std::to_string(i) + "-npus", 4));
    pods.push_back(api.create("/api/v1/namespaces/default/pods", dra::pod("train", i)));
  }
  // The job is planned from its claims (2 pods x 4 chips) on the nodes no claim fills.
  json r = s.post(*s.extender, "/filter", {{"Pod", pods[0]}, {"NodeNames", names}});
  ASSERT_EQ(r["NodeNames"].size(), 1u) << r.dump();
  const std::string node0 = r["NodeNames"][0];
  EXPECT_TRUE(node0 == "node-2" || node0 == "node-3") << node0;
  auto got = s.client->Get("/v1/jobs/default/train/placement");
  ASSERT_TRUE(got && got->status == 200) << (got ? got->body : "");
  json placement = json::parse(got->body);
  ASSERT_EQ(placement["pods"].size(), 2u) << placement.dump();
  EXPECT_EQ(dra::chips_of(placement["pods"][0]).size(), 4u);
  // Bound before its claim is allocated: refused, saying so (kube-scheduler binds after its PreBind wrote
  // the allocation; without it the pod's chips are not known).
  const json bind0 = {{"PodName", "train-0"},
                      {"PodNamespace", "default"},
                      {"PodUID", pods[0]["metadata"]["uid"]},
                      {"Node", node0}};
  json b = s.post(*s.extender, "/bind", bind0);
  EXPECT_NE(b.value("Error", "").find("train-0-npus of pod train-0 is not allocated on " + node0),
            std::string::npos)
      << b.dump();
  // kube-scheduler's allocator picked other chips of that node than the plan: the pod holds those. When the
  // plan put pod 1 on that node too, the chips taken may be the ones planned for it: pod 1's reservation
  // then takes the chips pod 0 leaves (same node, same size: the plan's cost is the same).
  const std::vector<int> planned = dra::chips_of(placement["pods"][0]);
  const std::string planned1_node = placement["pods"][1]["node"];
  std::vector<int> given;
  for (int c = 0; c < 8 && given.size() < 4; ++c) {
    if (std::find(planned.begin(), planned.end(), c) == planned.end()) given.push_back(c);
  }
  dra::allocate(api, "train-0-npus", node0, given);
  b = s.post(*s.extender, "/bind", bind0);
  EXPECT_EQ(b.value("Error", ""), "") << b.dump();
  json p0 = api.get("/api/v1/namespaces/default/pods/train-0");
  EXPECT_EQ(p0["spec"]["nodeName"], node0);
  EXPECT_EQ(p0["metadata"]["annotations"][kChipsAnnotation], format_chips(given));
  EXPECT_EQ(p0["metadata"]["annotations"][kRankStartAnnotation], "0");
  got = s.client->Get("/v1/jobs/default/train/placement");
  ASSERT_TRUE(got && got->status == 200);
  placement = json::parse(got->body);
  EXPECT_EQ(dra::chips_of(placement["pods"][0]), given);
  if (planned1_node == node0) {
    EXPECT_EQ(dra::chips_of(placement["pods"][1]), planned) << "pod 1 takes the chips pod 0 left";
  }
  // The second pod, filtered to its planned node, gets the chips planned for it now.
  r = s.post(*s.extender, "/filter", {{"Pod", pods[1]}, {"NodeNames", names}});
  ASSERT_EQ(r["NodeNames"].size(), 1u) << r.dump();
  const std::string node1 = r["NodeNames"][0];
  EXPECT_EQ(node1, planned1_node);
  const std::vector<int> given1 = dra::chips_of(placement["pods"][1]);
  dra::allocate(api, "train-1-npus", node1, given1);
  b = s.post(*s.extender, "/bind",
             {{"PodName", "train-1"},
              {"PodNamespace", "default"},
              {"PodUID", pods[1]["metadata"]["uid"]},
              {"Node", node1}});
  EXPECT_EQ(b.value("Error", ""), "") << b.dump();
  // The job's rank table (its ConfigMap) names the claimed chips, and is complete: no Allocate comes for a
  // DRA pod.
  json cm;
  ASSERT_TRUE(wait_for([&] {
    cm = api.get("/api/v1/namespaces/default/configmaps/ascend-job-train");
    return cm.is_object() &&
           json::parse(cm["data"][kRankTableKey].get<std::string>())["status"] == "completed";
  })) << cm.dump();
  json rt = json::parse(cm["data"][kRankTableKey].get<std::string>());
  std::map<std::string, std::set<std::string>> devices;  // node -> device ids
  for (const auto& srv : rt["server_list"])
    for (const auto& d : srv["device"]) devices[srv["server_id"]].insert(d["device_id"].get<std::string>());
  std::map<std::string, std::set<std::string>> want;
  for (int c : given) want[node0].insert(std::to_string(c));
  for (int c : given1) want[node1].insert(std::to_string(c));
  EXPECT_EQ(devices, want) << rt.dump();
  EXPECT_EQ(held(s.view()), held_in_api(api));
}

TEST(KubeSyncDra, ClaimsFreeTheirChipsWhenTheyGoAndAServerWithoutDraRefusesClaimJobsSayingWhy) {
  FakeApiServer api;
  put_nodes(api);
  api.create(dra::kClaims, dra::claim("other", 8));
  dra::allocate(api, "other", "node-0", {0, 1, 2, 3, 4, 5, 6, 7});
  {
    Cached s(api);
    ASSERT_TRUE(wait_for([&] { return s.ready(); }));
    // A plain pod asking for 8 chips through the device plugin: node-0 is full of claimed chips.
    json plain = api.create("/api/v1/namespaces/default/pods", testing::plain_pod("big", 8));
    json r = s.post(*s.extender, "/filter", {{"Pod", plain}, {"NodeNames", json::array({"node-0"})}});
    EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
    // The claim goes: its chips are offered again.
    api.remove(dra::kClaims + "/other");
    EXPECT_TRUE(wait_for([&] {
      json again = s.post(*s.extender, "/filter", {{"Pod", plain}, {"NodeNames", json::array({"node-0"})}});
      return again["NodeNames"].size() == 1;
    }));
    // A pod of the profile that asks for none of our chips (kube-scheduler sends every pod once the
    // extender has no managedResources): it passes everywhere and is only bound, with nothing recorded.
    json none = api.create("/api/v1/namespaces/default/pods", testing::plain_pod("web", 0));
    r = s.post(*s.extender, "/filter", {{"Pod", none}, {"NodeNames", json::array({"node-0", "node-1"})}});
    EXPECT_EQ(r["NodeNames"].size(), 2u) << r.dump();
    json b = s.post(*s.extender, "/bind",
                    {{"PodName", "web"},
                     {"PodNamespace", "default"},
                     {"PodUID", none["metadata"]["uid"]},
                     {"Node", "node-1"}});
    EXPECT_EQ(b.value("Error", ""), "") << b.dump();
    json web = api.get("/api/v1/namespaces/default/pods/web");
    EXPECT_EQ(web["spec"]["nodeName"], "node-1");
    EXPECT_FALSE(web["metadata"].contains("annotations") &&
                 web["metadata"]["annotations"].contains(kChipsAnnotation))
        << web.dump();
    // A pod the watch has not brought yet (the real one serves watches from a cache behind what a GET
    // reads): read once at bind, which also says whether it is there (its UID, not another's).
    api.hold_watches("pods", true);
    json late = api.create("/api/v1/namespaces/default/pods", testing::plain_pod("late", 0));
    auto gets_of_late = [&] {
      int n = 0;
      for (const auto& q : api.requests())
        n += q.method == "GET" && q.path == "/api/v1/namespaces/default/pods/late";
      return n;
    };
    api.clear_requests();
    b = s.post(
        *s.extender, "/bind",
        {{"PodName", "late"}, {"PodNamespace", "default"}, {"PodUID", "not-its-uid"}, {"Node", "node-1"}});
    EXPECT_NE(b.value("Error", "").find("is not in the API server"), std::string::npos) << b.dump();
    EXPECT_EQ(gets_of_late(), 1);
    api.clear_requests();
    b = s.post(*s.extender, "/bind",
               {{"PodName", "late"},
                {"PodNamespace", "default"},
                {"PodUID", late["metadata"]["uid"]},
                {"Node", "node-1"}});
    EXPECT_EQ(b.value("Error", ""), "") << b.dump();
    EXPECT_EQ(gets_of_late(), 1) << "one read of the pod at bind";
    EXPECT_EQ(api.get("/api/v1/namespaces/default/pods/late")["spec"]["nodeName"], "node-1");
    api.hold_watches("pods", false);
  }
  {  // Two pods of a job naming one claim (not a template): the second is refused, saying which pod has it.
    Cached s(api);
    ASSERT_TRUE(wait_for([&] { return s.ready(); }));
    api.create(dra::kClaims, dra::claim("shared", 4));
    json a = dra::pod("pair", 0), b = dra::pod("pair", 1);
    a["spec"]["resourceClaims"][0]["resourceClaimName"] = "shared";
    b["spec"]["resourceClaims"][0]["resourceClaimName"] = "shared";
    api.create("/api/v1/namespaces/default/pods", a);
    json pb = api.create("/api/v1/namespaces/default/pods", b);
    json r;
    EXPECT_TRUE(wait_for([&] {  // once the pod informer has pair-0
      r = s.post(*s.extender, "/filter", {{"Pod", pb}, {"NodeNames", json::array({"node-1", "node-2"})}});
      return r.dump().find("is used by pod default/pair-0 of the job too") != std::string::npos;
    })) << r.dump();
    EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
  }
  {  // The Binding fails after our bind took the claim's chips (the pod was bound meanwhile: 409): the chips
     // go back (a DRA slot is Allocated at once, so this is a release, not an unbind).
    Cached s(api);
    ASSERT_TRUE(wait_for([&] { return s.ready(); }));
    api.create(dra::kClaims, dra::claim("solo-0-npus", 4));
    json p = dra::pod("solo", 0);
    p["metadata"]["annotations"]["ascend.huawei.com/job-pods"] = "1";
    p["metadata"]["annotations"]["ascend.huawei.com/parallel"] = "tp=4";
    p = api.create("/api/v1/namespaces/default/pods", p);
    json r = s.post(*s.extender, "/filter", {{"Pod", p}, {"NodeNames", json::array({"node-3"})}});
    ASSERT_EQ(r["NodeNames"].size(), 1u) << r.dump();
    dra::allocate(api, "solo-0-npus", "node-3", {0, 1, 2, 3});
    json bound = api.get("/api/v1/namespaces/default/pods/solo-0");
    bound["spec"]["nodeName"] = "node-2";  // someone else bound it: our Binding gets 409
    api.update("/api/v1/namespaces/default/pods/solo-0", bound);
    json b = s.post(*s.extender, "/bind",
                    {{"PodName", "solo-0"},
                     {"PodNamespace", "default"},
                     {"PodUID", p["metadata"]["uid"]},
                     {"Node", "node-3"}});
    EXPECT_NE(b.value("Error", ""), "") << b.dump();
    const json view = s.view();
    // None on node-3, where our bind took them (the cache may meanwhile follow the pod where it was bound).
    for (const auto& [chip, pod] : held(view))
      EXPECT_FALSE(pod == "solo-0" && chip.starts_with("node-3 ")) << chip << " " << view.dump();
    // The same for a device-plugin pod: the Binding's error is the answer (not a 500), its chips not bound.
    // (node-0: whether the pair job above was placed on node-1 before its refusal depends on its informer.)
    json plain = api.create("/api/v1/namespaces/default/pods", testing::plain_pod("dp", 2));
    r = s.post(*s.extender, "/filter", {{"Pod", plain}, {"NodeNames", json::array({"node-0"})}});
    ASSERT_EQ(r["NodeNames"].size(), 1u) << r.dump();
    json taken = api.get("/api/v1/namespaces/default/pods/dp");
    taken["spec"]["nodeName"] = "node-3";
    api.update("/api/v1/namespaces/default/pods/dp", taken);
    b = s.post(*s.extender, "/bind",
               {{"PodName", "dp"},
                {"PodNamespace", "default"},
                {"PodUID", plain["metadata"]["uid"]},
                {"Node", "node-0"}});
    EXPECT_NE(b.value("Error", "").find("creating the Binding of pod default/dp"), std::string::npos)
        << b.dump();
    // None on node-0, where our bind took them; the cache may meanwhile adopt the pod where it was bound
    // (node-3: "bound by another replica"), which is right.
    for (const auto& [chip, pod] : held(s.view()))
      EXPECT_FALSE(pod == "default/dp" && chip.starts_with("node-0 ")) << chip;
  }
  // An API server without resource.k8s.io/v1: the cache is ready all the same, and a job pod with claims
  // is refused on every node with the reason.
  api.set_group_served("resource.k8s.io/v1", false);
  Cached s(api);
  ASSERT_TRUE(wait_for([&] { return s.ready(); })) << "no resourceclaims informer to wait for";
  json p = api.create("/api/v1/namespaces/default/pods", dra::pod("nodra", 0));
  json r = s.post(*s.extender, "/filter", {{"Pod", p}, {"NodeNames", json::array({"node-0", "node-1"})}});
  EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
  EXPECT_NE(r.dump().find("serves no resource.k8s.io/v1"), std::string::npos) << r.dump();
}

}  // namespace
}  // namespace ascend::scheduler
