// The scheduler as a cache of the API server, without a server: the records it keeps there (pod annotations,
// the job's ConfigMap) and the transitions that follow what the API server says (extender_api.cc). Expected
// values come from the issue's record format: chips "0,1,2,3", rank-start = pod index x chips per pod, a
// ConfigMap "ascend-job-<job>" labelled ascend.huawei.com/job, hccl.json "initializing" until every pod is
// bound, then "completed".
#include <gtest/gtest.h>

#include "ascend/scheduler/extender.h"
#include "ascend/scheduler/kube_records.h"
#include "ascend/scheduler/pod.h"
#include "extender_util.h"

namespace ascend::scheduler {
namespace {

using nlohmann::json;
using testing::job_pod;
using testing::plain_pod;
using testing::small_cluster;

const Clock::time_point kT0 = Clock::time_point(std::chrono::seconds(1'700'000'000));

std::vector<std::string> names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("node-" + std::to_string(i));
  return out;
}

PodInfo info(const json& pod) {
  auto p = read_pod(pod);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return *p;
}

// The pod as the API server has it after our bind: its node, our annotations, a phase.
json bound(json pod, const std::string& node, const std::vector<int>& chips, const std::string& phase) {
  pod["spec"]["nodeName"] = node;
  pod["metadata"]["annotations"][kChipsAnnotation] = format_chips(chips);
  pod["status"]["phase"] = phase;
  return pod;
}

ApiPod api(const json& pod) {
  auto p = read_api_pod(pod);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return *p;
}

// Places job "train" (tp=4, pp=2, dp=2: 4 pods of 4 chips) on `s` and binds the pods in `bind`.
std::vector<std::string> place_and_bind(Scheduler& s, const std::vector<int>& bind) {
  std::vector<std::string> where(4);
  for (int i = 0; i < 4; ++i) {
    auto r = s.filter(info(job_pod("train", i, 4, "tp=4,pp=2,dp=2")), names(4), kT0);
    EXPECT_EQ(r.passed.size(), 1u) << "pod " << i;
    if (!r.passed.empty()) where[static_cast<std::size_t>(i)] = r.passed[0];
  }
  for (int i : bind) {
    auto name = "train-" + std::to_string(i);
    auto st = s.bind("default", name, testing::uid_of(name), where[static_cast<std::size_t>(i)], kT0);
    EXPECT_TRUE(st.ok()) << st.error().message();
  }
  return where;
}

TEST(KubeRecords, ChipsAnnotationIsAscendingCommaSeparatedIds) {
  EXPECT_EQ(format_chips({0, 1, 2, 3}), "0,1,2,3");
  auto c = parse_chips("4,5,6,7");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<int>{4, 5, 6, 7}));
  for (const char* bad : {"", "1,,2", "2,1", "1,1", "-1", "1024", "a", "1 ,2", "0,1,"}) {
    EXPECT_FALSE(parse_chips(bad).ok()) << bad;
  }
}

TEST(KubeRecords, BindAnnotationsCarryChipsRankStartAndTheUidPrecondition) {
  json p = bind_annotations({8, 9, 10, 11}, 12, "u-1");
  EXPECT_EQ(p, json::parse(R"({"metadata": {"uid": "u-1", "annotations":
      {"ascend.huawei.com/chips": "8,9,10,11", "ascend.huawei.com/rank-start": "12"}}})"));
  EXPECT_FALSE(bind_annotations({0}, -1, "u")["metadata"]["annotations"].contains(kRankStartAnnotation));
}

TEST(KubeRecords, ReadsTheBoundPodBack) {
  auto p = api(bound(plain_pod("p", 2), "node-1", {2, 3}, "Running"));
  EXPECT_EQ(p.node, "node-1");
  EXPECT_EQ(p.phase, "Running");
  EXPECT_EQ(p.chips, (std::vector<int>{2, 3}));
  EXPECT_TRUE(followed(p));
  EXPECT_FALSE(followed(api(plain_pod("other", 0))));
  json bad = plain_pod("q", 1);
  bad["metadata"]["annotations"][kChipsAnnotation] = "3,x";
  EXPECT_FALSE(read_api_pod(bad).ok());
}

TEST(KubeRecords, SlimPodKeepsWhatTheSchedulerReads) {
  json pod = bound(job_pod("train", 1, 4, "tp=4,pp=2,dp=2"), "node-0", {0, 1, 2, 3}, "Pending");
  pod["metadata"]["managedFields"] = json::array({{{"manager", "kubectl"}}});
  pod["spec"]["volumes"] = json::array({{{"name", "v"}}});
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "A"}, {"value", "b"}}});
  // A claim named in the spec and one made from a template (its name in the status).
  pod["spec"]["resourceClaims"] = json::array({{{"name", "a"}, {"resourceClaimName", "shared"}},
                                               {{"name", "b"}, {"resourceClaimTemplateName", "t"}}});
  pod["status"]["resourceClaimStatuses"] =
      json::array({{{"name", "b"}, {"resourceClaimName", "train-1-b-x7k"}}});
  json slim = slim_pod(pod);
  EXPECT_FALSE(slim["metadata"].contains("managedFields"));
  EXPECT_FALSE(slim["spec"].contains("volumes"));
  EXPECT_FALSE(slim["spec"]["containers"][0].contains("env"));
  auto a = api(pod);
  auto b = api(slim);
  EXPECT_EQ(b.info.key(), a.info.key());
  EXPECT_EQ(b.info.chips, 4);
  EXPECT_EQ(b.info.index, 1);
  EXPECT_EQ(b.chips, a.chips);
  EXPECT_EQ(b.node, "node-0");
  EXPECT_EQ(b.phase, "Pending");
  EXPECT_EQ(b.info.claims, (std::vector<std::string>{"shared", "train-1-b-x7k"}));
}

TEST(KubeRecords, JobConfigMapNamesLabelsAndStatus) {
  Scheduler s(small_cluster(4));
  place_and_bind(s, {0, 1, 2});
  auto rec = s.job_record("default", "train");
  ASSERT_TRUE(rec.has_value());
  auto rt = s.ranktable_of("default", "train");
  ASSERT_TRUE(rt.ok());
  json cm = job_configmap(*rec, *rt);
  EXPECT_EQ(cm["metadata"]["name"], "ascend-job-train");
  EXPECT_EQ(cm["metadata"]["namespace"], "default");
  EXPECT_EQ(cm["metadata"]["labels"]["ascend.huawei.com/job"], "train");
  json hccl = json::parse(cm["data"]["hccl.json"].get<std::string>());
  EXPECT_EQ(hccl["status"], "initializing");                                    // pod 3 is not bound
  EXPECT_EQ(hccl["server_count"], json::parse(rt->at("server_count").dump()));  // rt is an ordered_json
  auto back = record_of(cm);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, *rec);
  EXPECT_EQ(record_version(cm), (*rec)["version"].get<std::uint64_t>());

  auto where = place_and_bind(s, {});
  ASSERT_TRUE(s.bind("default", "train-3", testing::uid_of("train-3"), where[3], kT0).ok());
  json done = job_configmap(*s.job_record("default", "train"), *s.ranktable_of("default", "train"));
  json hccl_done = json::parse(done["data"]["hccl.json"].get<std::string>());
  EXPECT_EQ(hccl_done["status"], "completed");
  EXPECT_GT(record_version(done), record_version(cm));

  json other = cm;
  other["metadata"]["name"] = "ascend-job-other";
  EXPECT_FALSE(record_of(other).ok());
  other["metadata"]["name"] = "settings";
  EXPECT_FALSE(record_of(other).ok());
  json broken = cm;
  broken["data"]["placement.json"] = "{";
  EXPECT_FALSE(record_of(broken).ok());
}

TEST(KubeCache, ASecondReplicaRebuildsTheSameViewFromTheRecordAndThePods) {
  Scheduler a(small_cluster(4));
  auto where = place_and_bind(a, {0, 1});  // half bound
  Scheduler b(small_cluster(4));
  ASSERT_TRUE(b.observe_job(*a.job_record("default", "train"), kT0).ok());
  EXPECT_EQ(b.cluster_view(), a.cluster_view());
  // Replica B answers the plugin of pod 0's node as A would.
  auto ra = a.reservations(where[0]);
  auto rb = b.reservations(where[0]);
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(rb->size(), ra->size());
  EXPECT_EQ((*rb)[0].chips, (*ra)[0].chips);
  auto g = b.take_allocation(where[0], (*ra)[0].chips, kT0);
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->env.at("RANK_START"), "0");
}

TEST(KubeCache, ARestartAdoptsBoundPodsAndKeepsTheUnboundPodsReservations) {
  Scheduler a(small_cluster(4));
  auto where = place_and_bind(a, {0, 1});
  json rec = *a.job_record("default", "train");
  // The new scheduler hears the pods first (a job pod waits for its record), then the record.
  Scheduler b(small_cluster(4));
  std::vector<ApiPod> pods;
  for (int i : {0, 1}) {
    auto held = a.held_by("default", "train-" + std::to_string(i));
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ(held->rank_start, i * 4);
    pods.push_back(api(bound(job_pod("train", i, 4, "tp=4,pp=2,dp=2"), where[static_cast<std::size_t>(i)],
                             held->chips, "Running")));
    EXPECT_EQ(b.observe_pod(pods.back(), false, kT0), Observed::kNothing);
  }
  ASSERT_TRUE(b.observe_job(rec, kT0).ok());
  for (const auto& p : pods)
    EXPECT_EQ(b.observe_pod(p, false, kT0), Observed::kNothing);  // the record has them
  // Unbound pods 2 and 3 pass filter only on their reserved nodes, and bind there.
  for (int i : {2, 3}) {
    auto r = b.filter(info(job_pod("train", i, 4, "tp=4,pp=2,dp=2")), names(4), kT0);
    ASSERT_EQ(r.passed, std::vector<std::string>{where[static_cast<std::size_t>(i)]});
    auto name = "train-" + std::to_string(i);
    ASSERT_TRUE(b.bind("default", name, testing::uid_of(name), r.passed[0], kT0).ok());
  }
  EXPECT_EQ(b.counts().used, 16);
}

TEST(KubeCache, APodGoneOrFinishedFreesItsChipsAndTheLastOneTheJob) {
  Scheduler s(small_cluster(4));
  auto where = place_and_bind(s, {0, 1, 2, 3});
  EXPECT_EQ(s.counts().used, 16);
  for (int i = 0; i < 4; ++i) {
    auto held = s.held_by("default", "train-" + std::to_string(i));
    ASSERT_TRUE(held.has_value());
    auto p = api(bound(job_pod("train", i, 4, "tp=4,pp=2,dp=2"), where[static_cast<std::size_t>(i)],
                       held->chips, i % 2 == 0 ? "Succeeded" : "Running"));
    EXPECT_EQ(s.observe_pod(p, /*gone=*/i % 2 == 1, kT0), Observed::kReleased) << i;
    EXPECT_EQ(s.observe_pod(p, true, kT0), Observed::kNothing) << "released once";
  }
  EXPECT_EQ(s.counts().used, 0);
  EXPECT_FALSE(s.job_record("default", "train").has_value());
  // A second job fits where the first was.
  auto again = place_and_bind(s, {0, 1, 2, 3});
  EXPECT_EQ(s.counts().used, 16);
}

TEST(KubeCache, APlainPodBoundElsewhereIsAdoptedAndItsChipsAreNotGivenTwice) {
  Scheduler s(small_cluster(2));
  auto p = api(bound(plain_pod("solo", 2), "node-1", {6, 7}, "Pending"));
  EXPECT_EQ(s.observe_pod(p, false, kT0), Observed::kAdopted);
  EXPECT_EQ(s.observe_pod(p, false, kT0), Observed::kNothing);
  auto rs = s.reservations("node-1");
  ASSERT_TRUE(rs.ok());
  ASSERT_EQ(rs->size(), 1u);
  EXPECT_EQ((*rs)[0].chips, (std::vector<int>{6, 7}));
  std::string why;
  auto clash = api(bound(plain_pod("thief", 1), "node-1", {7}, "Pending"));
  EXPECT_EQ(s.observe_pod(clash, false, kT0, &why), Observed::kConflict);
  EXPECT_NE(why.find("thief"), std::string::npos) << why;
  auto no_chip = api(bound(plain_pod("odd", 1), "node-1", {9}, "Pending"));
  EXPECT_EQ(s.observe_pod(no_chip, false, kT0, &why), Observed::kConflict);
  // A pod that runs has been allocated: it no longer waits for the plugin.
  EXPECT_EQ(s.observe_pod(api(bound(plain_pod("solo", 2), "node-1", {6, 7}, "Running")), false, kT0),
            Observed::kNothing);
  EXPECT_TRUE(s.reservations("node-1")->empty());
}

TEST(KubeCache, AnOlderRecordIsIgnoredAndANewerOneReplacesTheJob) {
  Scheduler a(small_cluster(4));
  place_and_bind(a, {0});
  json v1 = *a.job_record("default", "train");
  auto where = place_and_bind(a, {1});
  json v2 = *a.job_record("default", "train");
  ASSERT_GT(v2["version"].get<std::uint64_t>(), v1["version"].get<std::uint64_t>());
  Scheduler b(small_cluster(4));
  ASSERT_TRUE(b.observe_job(v2, kT0).ok());
  ASSERT_TRUE(b.observe_job(v1, kT0).ok());  // stale: ignored
  EXPECT_EQ(b.cluster_view(), a.cluster_view());
  // A record whose chips another pod holds is refused.
  Scheduler c(small_cluster(4));
  const auto& slot0 = v2["slots"][0];
  ASSERT_EQ(
      c.observe_pod(api(bound(plain_pod("other", 4), slot0["node"], slot0["chips"], "Running")), false, kT0),
      Observed::kAdopted);
  auto st = c.observe_job(v2, kT0);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), EEXIST);
  // A malformed record is an error naming the field, never an exception.
  json bad = v2;
  bad["slots"][0]["chips"] = "0-3";
  EXPECT_FALSE(b.observe_job(bad, kT0).ok());
  bad = v2;
  bad["namespace"] = "Not_A_Namespace";
  EXPECT_FALSE(b.observe_job(bad, kT0).ok());
}

TEST(KubeCache, ANodeTheApiServerDoesNotHaveOffersNothing) {
  Scheduler s(small_cluster(2));
  EXPECT_EQ(s.counts().free, 16);
  s.set_node_present("node-1", false);
  EXPECT_EQ(s.counts().free, 8);
  auto r = s.filter(info(plain_pod("p", 1)), names(2), kT0);
  EXPECT_EQ(r.passed, std::vector<std::string>{"node-0"});
  EXPECT_EQ(s.cluster_view()["nodes"][1]["absent"], true);
  s.set_node_present("node-1", true);
  EXPECT_EQ(s.counts().free, 16);
}

}  // namespace
}  // namespace ascend::scheduler

namespace ascend::scheduler {
namespace {

TEST(KubeCache, TheDeviceConfigMapSetsHealthAndKeepsWhatThePluginSaidIsInUse) {
  Scheduler s(testing::small_cluster(1));
  Inventory inv;
  inv.resource = "huawei.com/Ascend910";
  for (int c = 0; c < 8; ++c) inv.chips.push_back({c, true, c == 0});
  ASSERT_TRUE(s.put_inventory("node-0", inv, kT0).ok());
  EXPECT_EQ(s.counts().used, 1);
  // Chip 7 unhealthy, chip 6 in neither list (gone): two chips not usable; chip 0 still in use.
  ASSERT_TRUE(s.put_health("node-0", {0, 1, 2, 3, 4, 5}, {7}, kT0).ok());
  auto c = s.counts();
  EXPECT_EQ(c.unhealthy, 2);
  EXPECT_EQ(c.used, 1);
  EXPECT_EQ(c.free, 5);
  ASSERT_TRUE(s.put_health("node-0", {0, 1, 2, 3, 4, 5, 6, 7}, {}, kT0).ok());
  EXPECT_EQ(s.counts().free, 7);
  EXPECT_EQ(s.put_health("node-9", {}, {}, kT0).error().code(), ENOENT);
}

}  // namespace
}  // namespace ascend::scheduler

namespace ascend::scheduler {
namespace {

// ---- recovery from chip faults (issue 23), the pure part -------------------------------------------------

json with_recovery(json pod, const std::string& mode, const std::string& max) {
  pod["metadata"]["annotations"][kRecoveryAnnotation] = mode;
  if (!max.empty()) pod["metadata"]["annotations"][kMaxRestartsAnnotation] = max;
  return pod;
}

TEST(KubeRecoveryRules, TheAnnotationsAreReadAndCheckedWithDefaultsJobAndThree) {
  auto plain = info(job_pod("t", 0, 4, "tp=4,pp=2,dp=2"));
  EXPECT_EQ(plain.job->recovery, "job");
  EXPECT_EQ(plain.job->max_restarts, 3);
  auto pod = info(with_recovery(job_pod("t", 0, 4, "tp=4,pp=2,dp=2"), "pod", "7"));
  EXPECT_EQ(pod.job->recovery, "pod");
  EXPECT_EQ(pod.job->max_restarts, 7);
  EXPECT_NE(
      info(with_recovery(job_pod("t", 0, 4, "tp=4,pp=2,dp=2"), "all", "")).job_error.find("pod, job or none"),
      std::string::npos);
  EXPECT_NE(info(with_recovery(job_pod("t", 0, 4, "tp=4,pp=2,dp=2"), "pod", "101")).job_error.find("0-100"),
            std::string::npos);
}

// A 4-pod job with `mode` and `max`, every pod bound; returns where each pod is.
std::vector<std::string> bound_job(Scheduler& s, const std::string& mode, const std::string& max) {
  std::vector<std::string> where(4);
  for (int i = 0; i < 4; ++i) {
    auto r =
        s.filter(info(with_recovery(job_pod("train", i, 4, "tp=4,pp=2,dp=2"), mode, max)), names(4), kT0);
    where[static_cast<std::size_t>(i)] = r.passed.at(0);
  }
  for (int i = 0; i < 4; ++i) {
    auto n = "train-" + std::to_string(i);
    EXPECT_TRUE(s.bind("default", n, testing::uid_of(n), where[static_cast<std::size_t>(i)], kT0).ok());
  }
  return where;
}

TEST(KubeRecoveryRules, PodJobNoneAndSpentRestarts) {
  for (const char* mode : {"pod", "job", "none"}) {
    Scheduler s(small_cluster(4));
    auto where = bound_job(s, mode, "1");
    auto held = *s.held_by("default", "train-2");
    // A failed chip under pod 2 (and a healthy one beside it that is no one's failure).
    auto turned = s.put_health(where[2], {}, {held.chips[1]}, kT0);
    ASSERT_TRUE(turned.ok());
    auto rs = s.recover(where[2], {held.chips[1]}, kT0);
    ASSERT_EQ(rs.size(), 1u) << mode;
    const auto& r = rs[0];
    EXPECT_EQ(r.faulted_pod, "train-2");
    EXPECT_EQ(r.chips, std::vector<int>{held.chips[1]});
    EXPECT_EQ(r.mode, mode);
    if (std::string(mode) == "pod") {
      EXPECT_EQ(r.pods, std::vector<std::string>{"train-2"});
    }
    if (std::string(mode) == "job") {
      EXPECT_EQ(r.pods, (std::vector<std::string>{"train-0", "train-1", "train-2", "train-3"}));
    }
    if (std::string(mode) == "none") {
      EXPECT_TRUE(r.pods.empty());
    }
    EXPECT_EQ(r.restarts, std::string(mode) == "none" ? 0 : 1);
    EXPECT_EQ((*s.job_record("default", "train"))["restarts"], r.restarts);
    // max-restarts 1: the next fault evicts nobody.
    if (std::string(mode) != "none") {
      auto again = s.recover(where[2], {held.chips[0]}, kT0);
      ASSERT_EQ(again.size(), 1u);
      EXPECT_TRUE(again[0].exhausted);
      EXPECT_TRUE(again[0].pods.empty());
    }
  }
  // A chip no pod of a job holds: nothing to recover.
  Scheduler s(small_cluster(2));
  EXPECT_TRUE(s.recover("node-0", {3}, kT0).empty());
  EXPECT_EQ(*s.put_health("node-0", {0, 1, 2, 4, 5, 6, 7}, {3}, kT0), std::vector<int>{3});
  EXPECT_TRUE(s.put_health("node-0", {0, 1, 2, 4, 5, 6, 7}, {3}, kT0)->empty()) << "already unusable";
  // A fault the plugin's HTTP report told first still counts as new for the ConfigMap (the recovery's
  // source).
  Inventory inv;
  inv.resource = "huawei.com/Ascend910";
  for (int c = 0; c < 8; ++c) inv.chips.push_back({c, c != 5, false});
  ASSERT_TRUE(s.put_inventory("node-0", inv, kT0).ok());
  EXPECT_EQ(*s.put_health("node-0", {0, 1, 2, 4, 6, 7}, {3, 5}, kT0), std::vector<int>{5});
}

// ---- the job's state through a recovery (issue 23) --------------------------------------------------------

using std::chrono::milliseconds;

std::string state_of(const Scheduler& s, const std::string& job = "train") {
  auto v = s.status_of("default", job);
  return v.ok() ? (*v)["state"].get<std::string>() : "(none: " + v.error().message() + ")";
}

// The node's device ConfigMap names `bad` unhealthy and its other chips healthy.
Result<std::vector<int>> sick_only(Scheduler& s, const std::string& node, const std::vector<int>& bad,
                                   Clock::time_point now) {
  std::vector<int> healthy;
  for (int c = 0; c < 8; ++c) {
    if (std::find(bad.begin(), bad.end(), c) == bad.end()) healthy.push_back(c);
  }
  return s.put_health(node, healthy, bad, now);
}

ApiPod gone_pod(const std::string& name) {
  ApiPod p;
  p.info.ns = "default";
  p.info.name = name;
  return p;
}

TEST(KubeRecoveryState, PodRecoveryIsRecoveringFromTheFaultUntilTheReplacementIsBoundThenRunning) {
  Scheduler s(small_cluster(4));
  auto where = bound_job(s, "pod", "3");
  EXPECT_EQ(state_of(s), "Running") << "every pod bound";
  const double cost0 = (*s.status_of("default", "train"))["cost"]["total"].get<double>();
  auto held = *s.held_by("default", "train-2");
  const auto t_fault = kT0 + milliseconds(1000);
  ASSERT_TRUE(sick_only(s, where[2], {held.chips[1]}, t_fault).ok());
  auto rs = s.recover(where[2], {held.chips[1]}, t_fault, "SeparateNPU 80E18402");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_FALSE(rs[0].failed_now);
  auto v = *s.status_of("default", "train");
  EXPECT_EQ(v["state"], "Recovering");
  EXPECT_EQ(v["since_ms"], 1'700'000'001'000LL);
  EXPECT_EQ(v["restarts"], 1);
  EXPECT_EQ(v["why"], "chips " + std::to_string(held.chips[1]) + " of " + where[2] +
                          " failed under pod train-2 (SeparateNPU 80E18402); restart 1 of 3 (pod recovery)");
  ASSERT_EQ(v["faults"].size(), 1u);
  EXPECT_EQ(v["faults"][0]["pod"], "train-2");
  EXPECT_EQ(v["faults"][0]["chips"], nlohmann::ordered_json::array({held.chips[1]}));
  EXPECT_EQ(v["faults"][0]["why"], "SeparateNPU 80E18402");
  // The eviction takes pod 2 away; its owner makes it again; it is placed and bound 2.5 s after the fault.
  EXPECT_EQ(s.observe_pod(gone_pod("train-2"), true, t_fault + milliseconds(100)), Observed::kReleased);
  EXPECT_EQ(state_of(s), "Recovering");
  auto r = s.filter(info(with_recovery(job_pod("train", 2, 4, "tp=4,pp=2,dp=2"), "pod", "3")), names(4),
                    t_fault + milliseconds(2000));
  ASSERT_EQ(r.passed.size(), 1u);
  EXPECT_EQ(state_of(s), "Recovering") << "not bound yet";
  ASSERT_TRUE(s.bind("default", "train-2", "uid-2b", r.passed[0], t_fault + milliseconds(2500)).ok());
  auto now_held = *s.held_by("default", "train-2");
  if (r.passed[0] == where[2]) {
    EXPECT_EQ(std::count(now_held.chips.begin(), now_held.chips.end(), held.chips[1]), 0);
  }
  EXPECT_EQ(now_held.rank_start, 8) << "pod 2 keeps its ranks";
  EXPECT_EQ(state_of(s), "Running");
  EXPECT_EQ(s.take_recoveries(), std::vector<double>{2.5}) << "fault at +1 s, bound at +3.5 s";
  EXPECT_TRUE(s.take_recoveries().empty()) << "taken once";
  EXPECT_EQ(s.counts().running_jobs, 1);
  // The recovery against the placement the fault made the job leave (the AscendRecovered Event's facts).
  auto done = s.take_recovered();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].job, "train");
  EXPECT_EQ(done[0].pod, "train-2") << "the pod whose binding made the job whole";
  EXPECT_EQ(done[0].restarts, 1);
  EXPECT_EQ(done[0].mode, "pod");
  EXPECT_DOUBLE_EQ(done[0].seconds, 2.5);
  EXPECT_DOUBLE_EQ(done[0].cost_before_fault, cost0);
  auto after = *s.status_of("default", "train");
  EXPECT_DOUBLE_EQ(done[0].cost_after, after["cost"]["total"].get<double>());
  EXPECT_DOUBLE_EQ(after["cost_before_fault"].get<double>(), cost0);
  EXPECT_DOUBLE_EQ(after["cost_after_recovery"].get<double>(), done[0].cost_after);
  EXPECT_TRUE(s.take_recovered().empty()) << "taken once";
}

TEST(KubeRecoveryState, JobRecoveryKeepsTheRecordAndThePodsComeBackToTheirOwnChipsTheFaultedOneElsewhere) {
  Scheduler s(small_cluster(4));
  auto where = bound_job(s, "job", "3");
  std::vector<Scheduler::Held> before;
  for (int i = 0; i < 4; ++i) before.push_back(*s.held_by("default", "train-" + std::to_string(i)));
  const int bad = before[2].chips[0];
  ASSERT_TRUE(sick_only(s, where[2], {bad}, kT0).ok());
  auto rs = s.recover(where[2], {bad}, kT0);
  ASSERT_EQ(rs.size(), 1u);
  ASSERT_EQ(rs[0].pods.size(), 4u);
  for (int i = 0; i < 4; ++i) s.observe_pod(gone_pod("train-" + std::to_string(i)), true, kT0);
  EXPECT_TRUE(s.holders().empty()) << "every chip is free while the pods are away";
  EXPECT_EQ(state_of(s), "Recovering") << "the record stays: the job comes back to its nodes";
  // The faulted pod comes back first (the hard order: the others' chips must not be given away).
  std::map<int, std::string> now_on;
  for (int i : {2, 0, 1, 3}) {
    auto r = s.filter(info(with_recovery(job_pod("train", i, 4, "tp=4,pp=2,dp=2"), "job", "3")), names(4),
                      kT0 + milliseconds(500));
    ASSERT_EQ(r.passed.size(), 1u) << "pod " << i;
    now_on[i] = r.passed[0];
    auto n = "train-" + std::to_string(i);
    ASSERT_TRUE(s.bind("default", n, n + "-again", r.passed[0], kT0 + milliseconds(700)).ok()) << i;
  }
  for (int i : {0, 1, 3}) {
    EXPECT_EQ(now_on[i], where[static_cast<std::size_t>(i)]) << "pod " << i << " is back on its node";
    EXPECT_EQ(s.held_by("default", "train-" + std::to_string(i))->chips,
              before[static_cast<std::size_t>(i)].chips)
        << "pod " << i << " has its own chips again";
  }
  auto c2 = s.held_by("default", "train-2")->chips;
  if (now_on[2] == where[2]) {
    EXPECT_EQ(std::count(c2.begin(), c2.end(), bad), 0) << "not on the failed chip";
  }
  EXPECT_EQ(state_of(s), "Running");
  EXPECT_EQ((*s.status_of("default", "train"))["restarts"], 1);
  EXPECT_EQ(s.take_recoveries(), std::vector<double>{0.7});
}

TEST(KubeRecoveryState, SpentRestartsFailTheJobOnceItsPodsAreNotPlacedAgainAndItIsForgottenAfterTheHold) {
  Scheduler s(small_cluster(4));
  auto where = bound_job(s, "pod", "0");
  auto held = *s.held_by("default", "train-1");
  ASSERT_TRUE(sick_only(s, where[1], {held.chips[0]}, kT0).ok());
  auto rs = s.recover(where[1], {held.chips[0]}, kT0);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_TRUE(rs[0].exhausted);
  EXPECT_TRUE(rs[0].failed_now);
  EXPECT_TRUE(rs[0].pods.empty()) << "nobody is evicted";
  EXPECT_EQ(state_of(s), "Failed");
  EXPECT_NE((*s.status_of("default", "train"))["why"].get<std::string>().find("max-restarts (0) spent"),
            std::string::npos);
  EXPECT_EQ(s.counts().failed_jobs, 1);
  // Another fault: still Failed, not "newly" so.
  ASSERT_TRUE(sick_only(s, where[1], {held.chips[0], held.chips[1]}, kT0).ok());
  auto again = s.recover(where[1], {held.chips[1]}, kT0);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0].failed_now);
  // Its pods end (their owner gives up): every chip is free, the record stays for kRecordHold.
  for (int i = 0; i < 4; ++i)
    s.observe_pod(gone_pod("train-" + std::to_string(i)), true, kT0 + milliseconds(10));
  EXPECT_TRUE(s.holders().empty());
  EXPECT_EQ(s.counts().used, 0) << "no chip leaks";
  auto r = s.filter(info(with_recovery(job_pod("train", 1, 4, "tp=4,pp=2,dp=2"), "pod", "0")), names(4),
                    kT0 + milliseconds(20));
  EXPECT_TRUE(r.passed.empty());
  ASSERT_FALSE(r.unresolvable.empty());
  EXPECT_NE(r.unresolvable.begin()->second.find("failed"), std::string::npos)
      << r.unresolvable.begin()->second;
  s.expire(kT0 + std::chrono::minutes(9), nullptr);
  EXPECT_EQ(state_of(s), "Failed") << "kept within the hold";
  std::vector<std::string> touched;
  s.expire(kT0 + std::chrono::minutes(10), &touched);
  EXPECT_EQ(touched, std::vector<std::string>{"default/train"}) << "its ConfigMap is synced (deleted)";
  EXPECT_EQ(s.status_of("default", "train").error().code(), ENOENT);
}

// The evicted pod made again (same name, a new uid) reaches /filter before the watch tells of the old one's
// deletion: the old pod is gone (the API server has one pod of a name), so its slot is placed again, not on
// the failed chip, and the old pod's late DELETED takes nothing from the new one (recovery_bench found both).
TEST(KubeRecoveryState, APodMadeAgainBeforeTheOldOnesDeletionIsSeenKeepsWhatItIsGiven) {
  Scheduler s(small_cluster(4));
  auto where = bound_job(s, "pod", "3");
  auto held = *s.held_by("default", "train-2");
  const auto t_fault = kT0 + milliseconds(1000);
  ASSERT_TRUE(sick_only(s, where[2], {held.chips[1]}, t_fault).ok());
  ASSERT_EQ(s.recover(where[2], {held.chips[1]}, t_fault, "SeparateNPU 80E18402").size(), 1u);
  json again = with_recovery(job_pod("train", 2, 4, "tp=4,pp=2,dp=2"), "pod", "3");
  again["metadata"]["uid"] = "uid-train-2-again";
  ASSERT_NE(again["metadata"]["uid"], testing::uid_of("train-2"));
  auto r = s.filter(info(again), names(4), t_fault + milliseconds(200));
  ASSERT_EQ(r.passed.size(), 1u);
  // The old pod's DELETED, late: it is not the pod that passed filter.
  ApiPod old = gone_pod("train-2");
  old.info.uid = testing::uid_of("train-2");
  EXPECT_EQ(s.observe_pod(old, true, t_fault + milliseconds(300)), Observed::kNothing);
  ASSERT_TRUE(
      s.bind("default", "train-2", "uid-train-2-again", r.passed[0], t_fault + milliseconds(400)).ok());
  auto now_held = *s.held_by("default", "train-2");
  if (r.passed[0] == where[2]) {
    EXPECT_EQ(std::count(now_held.chips.begin(), now_held.chips.end(), held.chips[1]), 0)
        << "not the failed chip";
  }
  EXPECT_EQ(now_held.rank_start, 8);
  EXPECT_EQ(state_of(s), "Running");
  // The new pod's own DELETED still frees its chips.
  ApiPod gone = gone_pod("train-2");
  gone.info.uid = "uid-train-2-again";
  EXPECT_EQ(s.observe_pod(gone, true, t_fault + milliseconds(500)), Observed::kReleased);
}

TEST(KubeRecoveryState, TheStateAndFaultsTravelInTheRecordToAnotherReplica) {
  Scheduler a(small_cluster(4));
  auto where = bound_job(a, "pod", "3");
  auto held = *a.held_by("default", "train-3");
  ASSERT_TRUE(sick_only(a, where[3], {held.chips[2]}, kT0).ok());
  ASSERT_EQ(a.recover(where[3], {held.chips[2]}, kT0 + milliseconds(40), "RestartNPU 80CB8003").size(), 1u);
  auto rec = *a.job_record("default", "train");
  Scheduler b(small_cluster(4));
  ASSERT_TRUE(b.observe_job(rec, kT0).ok());
  auto va = *a.status_of("default", "train");
  auto vb = *b.status_of("default", "train");
  for (const char* k : {"state", "since_ms", "why", "restarts", "faults", "cost_before_fault"})
    EXPECT_EQ(va[k], vb[k]) << k;
  EXPECT_EQ(vb["state"], "Recovering");
  EXPECT_FALSE(vb.contains("cost_after_recovery")) << "still recovering";
  // A cost that is not a number is refused, naming the field.
  auto bad = rec;
  bad["cost_before_fault"] = "cheap";
  bad["version"] = std::uint64_t{98};
  Scheduler d(small_cluster(4));
  auto sd = d.observe_job(bad, kT0);
  ASSERT_FALSE(sd.ok());
  EXPECT_NE(sd.error().message().find("cost_before_fault: not a number"), std::string::npos)
      << sd.error().message();
  // A record with an unknown state is refused, naming the field.
  rec["state"] = "Sleeping";
  rec["version"] = std::uint64_t{99};
  Scheduler c(small_cluster(4));
  auto st = c.observe_job(rec, kT0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("state"), std::string::npos) << st.error().message();
}

TEST(KubeRecoveryState, HolderOfAndIsolatedChips) {
  Scheduler s(small_cluster(2));
  auto where = place_and_bind(s, {0, 1, 2, 3});
  auto held = *s.held_by("default", "train-1");
  auto h = s.holder_of(where[1], held.chips[0]);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->pod, "train-1");
  EXPECT_EQ(h->job, "train");
  EXPECT_FALSE(s.holder_of("node-9", 0).has_value());
  ASSERT_TRUE(s.put_health("node-0", {0, 1, 2, 3, 4, 5, 6}, {7}, kT0, {7}).ok());
  EXPECT_EQ(s.counts().isolated, 1);
  auto view = s.cluster_view();
  EXPECT_EQ(view["nodes"][0]["chips"][7]["isolated"], true);
  EXPECT_FALSE(view["nodes"][0]["chips"][6].contains("isolated"));
  EXPECT_EQ(view["chips"]["isolated"], 1);
}

}  // namespace
}  // namespace ascend::scheduler
