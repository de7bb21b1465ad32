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
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "ascend/common/kube_client.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/scheduler/kube_records.h"
#include "ascend/scheduler/server.h"
#include "extender_util.h"
#include "fake_apiserver.h"

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

// The device plugin of `node` reports chip `bad` failed (MindCluster's device ConfigMap).
void fail_chip(FakeApiServer& api, const std::string& node, int bad) {
  deviceinfo::NodeDevices d;
  d.node = node;
  d.resource = "huawei.com/Ascend910";
  for (int c = 0; c < 8; ++c) (c == bad ? d.unhealthy : d.healthy).push_back(c);
  d.faults.push_back({bad, {"80E01801"}});
  api.create(std::string("/api/v1/namespaces/") + deviceinfo::kNamespace + "/configmaps",
             deviceinfo::to_configmap(d));
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

}  // namespace
}  // namespace ascend::scheduler
