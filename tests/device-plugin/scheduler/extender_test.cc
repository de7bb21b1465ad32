// The extender's state machine and wire format, without a socket. Expected values are worked out by hand from
// the rules (a job's pod N holds ranks N*k .. N*k+k-1; every pod passes only on its reserved node; a
// job that does not fit reserves nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "ascend/scheduler/extender.h"
#include "ascend/scheduler/pod.h"
#include "ascend/scheduler/wire.h"
#include "extender_util.h"

namespace ascend::scheduler {
namespace {

using nlohmann::json;
using testing::job_pod;
using testing::plain_pod;
using testing::small_cluster;

const Clock::time_point kT0 = Clock::time_point(std::chrono::seconds(1'800'000'000));

PodInfo read(const json& pod) {
  auto p = read_pod(pod);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p.ok() ? *p : PodInfo{};
}

std::vector<std::string> names(const topology::Cluster& c) {
  std::vector<std::string> out;
  for (const auto& n : c.nodes) out.push_back(n.name);
  return out;
}

// ---- pods -----------------------------------------------------------------------------------------------

TEST(Pod, DemandIsTheSumOfContainersOrTheLargestInitContainer) {
  json pod = plain_pod("p", 2);
  pod["spec"]["containers"].push_back(
      {{"name", "b"}, {"resources", {{"limits", {{"huawei.com/Ascend910", "3"}}}}}});
  EXPECT_EQ(read(pod).chips, 5);
  pod["spec"]["initContainers"] =
      json::array({{{"name", "i"}, {"resources", {{"requests", {{"huawei.com/Ascend910", 6}}}}}}});
  EXPECT_EQ(read(pod).chips, 6);
  EXPECT_EQ(read(pod).resource, "huawei.com/Ascend910");
}

TEST(Pod, KeysMatchInAnyLetterCaseAsGoDoes) {
  json pod = {
      {"METADATA", {{"Name", "x-1"}, {"NameSpace", "ns"}}},
      {"Spec",
       {{"Containers", json::array({{{"Resources", {{"Limits", {{"huawei.com/Ascend910", "1"}}}}}}})}}}};
  PodInfo p = read(pod);
  EXPECT_EQ(p.key(), "ns/x-1");
  EXPECT_EQ(p.chips, 1);
}

TEST(Pod, JobAnnotationsAndIndex) {
  struct Case {
    json annotations;
    std::string name;
    int index;
    std::string error_has;
  };
  const json base = {
      {kJobAnnotation, "train"}, {kJobPodsAnnotation, "8"}, {kParallelAnnotation, "tp=8,pp=4,dp=2"}};
  auto with = [&](json extra) {
    json a = base;
    a.update(extra);
    return a;
  };
  std::vector<Case> cases = {
      {base, "train-3", 3, ""},
      {with({{kPodIndexAnnotation, "5"}}), "worker-a", 5, ""},
      {with({{kCompletionIndexAnnotation, "2"}}), "train-x7k2p", 2, ""},
      {base, "worker", -1, "no -N suffix"},
      {with({{kParallelAnnotation, "tp=8,pp=4,ep=2"}}), "train-0", -1, "unknown dimension 'ep'"},
      {with({{kParallelAnnotation, "tp=0"}}), "train-0", -1, "whole number from 1"},
      {with({{kJobPodsAnnotation, "many"}}), "train-0", -1, "not a pod count"},
      {with({{kOrderAnnotation, "dp-tp-pp"}}), "train-0", -1, "not tp-dp-pp or tp-pp-dp"},
      {with({{kPodIndexAnnotation, "-1"}}), "train-0", -1, "not a pod index"},
  };
  for (const auto& c : cases) {
    json pod = plain_pod(c.name, 8);
    pod["metadata"]["annotations"] = c.annotations;
    PodInfo p = read(pod);
    SCOPED_TRACE(c.annotations.dump() + " " + c.name);
    if (c.error_has.empty()) {
      ASSERT_TRUE(p.job.has_value());
      EXPECT_EQ(p.index, c.index);
      EXPECT_EQ(p.job->tp, 8);
      EXPECT_EQ(p.job->pp, 4);
      EXPECT_EQ(p.job->dp, 2);
      EXPECT_EQ(p.job->pods, 8);
      EXPECT_EQ(p.job_error, "");
    } else {
      EXPECT_NE(p.job_error.find(c.error_has), std::string::npos) << p.job_error;
    }
  }
}

TEST(Pod, CommBytesOverrideTheDefaultsPerDimension) {
  json pod = job_pod("t", 0, 8, "tp=8,dp=2");
  pod["metadata"]["annotations"][kCommAnnotation] = "dp=3e9,tp=1.5e10";
  PodInfo p = read(pod);
  ASSERT_TRUE(p.job.has_value()) << p.job_error;
  EXPECT_EQ(p.job->comm.tp, 1.5e10);
  EXPECT_EQ(p.job->comm.dp, 3e9);
  EXPECT_EQ(p.job->comm.pp, 0.25e9) << "the default (docs/scheduler.md) where the pod says nothing";
  for (const char* bad : {"tp=-1", "tp=x", "ep=1", "tp=1,tp=2", "tp"}) {
    pod["metadata"]["annotations"][kCommAnnotation] = bad;
    EXPECT_NE(read(pod).job_error.find(kCommAnnotation), std::string::npos) << bad;
  }
}

TEST(Pod, WrongTypesAreErrorsNamingTheField) {
  struct Case {
    json pod;
    std::string has;
  };
  std::vector<Case> cases = {
      {json::array(), "not an object"},
      {json{{"spec", json::object()}}, "metadata"},
      {json{{"metadata", {{"name", 3}}}}, "Pod.metadata.name: not a string"},
      {json{{"metadata", {{"name", "a"}}}, {"spec", {{"containers", "x"}}}}, "spec.containers: not an array"},
      {json{{"metadata", {{"name", "a"}}},
            {"spec",
             {{"containers",
               json::array({{{"resources", {{"limits", {{"huawei.com/Ascend910", "500m"}}}}}}})}}}},
       "not a whole number"},
      {json{{"metadata", {{"name", "a"}, {"annotations", "x"}}}}, "annotations: not an object"},
  };
  for (const auto& c : cases) {
    auto p = read_pod(c.pod);
    ASSERT_FALSE(p.ok()) << c.pod.dump();
    EXPECT_NE(p.error().message().find(c.has), std::string::npos) << p.error().message();
  }
}

// ---- plain pods -----------------------------------------------------------------------------------------

TEST(Filter, APlainPodPassesWhereTheNodeLevelChoiceCanServeIt) {
  // node-0: 8 free; node-1: 6 busy (2 free); node-2: 910 A1 (sizes 1, 2, 4, 8 only).
  auto c = testing::make_cluster({{"node-0", "atlas800t-a2", "leaf-0", {}, {}},
                                  {"node-1", "atlas800t-a2", "leaf-0", {0, 1, 2, 3, 4, 5}, {}},
                                  {"node-2", "atlas800-9000", "leaf-0", {}, {}}});
  Scheduler s(c);
  auto r = s.filter(read(plain_pod("p", 3)), {"node-0", "node-1", "node-2", "ghost"}, kT0);
  EXPECT_EQ(r.passed, std::vector<std::string>{"node-0"});
  EXPECT_EQ(r.failed.at("node-1"), "2 of 8 chips free (6 in use); the pod needs 3");
  EXPECT_NE(r.unresolvable.at("node-2").find("3"), std::string::npos) << r.unresolvable.at("node-2");
  EXPECT_EQ(r.unresolvable.at("ghost"), "node ghost is not in the scheduler's cluster file");
  json p310 = plain_pod("q", 1, "huawei.com/Ascend310P");
  auto r2 = s.filter(read(p310), {"node-0"}, kT0);
  EXPECT_EQ(r2.unresolvable.at("node-0"),
            "node has huawei.com/Ascend910 chips; the pod asks for huawei.com/Ascend310P");
}

TEST(Bind, APlainPodGetsTheNodeLevelChoiceAndAnUnknownPodIsAnError) {
  auto c = small_cluster(2);
  Scheduler s(c);
  EXPECT_NE(s.bind("default", "nobody", "", "node-0", kT0).error().message().find("unknown"),
            std::string::npos);
  s.filter(read(plain_pod("p", 4)), {"node-0", "node-1"}, kT0);
  ASSERT_TRUE(s.bind("default", "p", "uid-1", "node-1", kT0).ok());
  auto res = s.reservations("node-1");
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->size(), 1U);
  EXPECT_EQ((*res)[0].pod, "p");
  EXPECT_EQ((*res)[0].job, "");
  EXPECT_EQ((*res)[0].chips.size(), 4U);
  // The chips are held: 4 of node-1's 8 are left for the next pod.
  auto r = s.filter(read(plain_pod("q", 5)), {"node-1"}, kT0);
  EXPECT_EQ(r.failed.at("node-1"), "4 of 8 chips free (4 reserved for pods); the pod needs 5");
}

// ---- jobs -----------------------------------------------------------------------------------------------

TEST(Filter, AJobIsPlacedWholeOnItsFirstPodAndEveryPodPassesOnlyOnItsNode) {
  auto c = small_cluster(12);  // 96 chips, 2 leaves of 6 nodes
  Scheduler s(c);
  auto all = names(c);
  std::set<std::string> used;
  for (int i = 0; i < 8; ++i) {
    auto r = s.filter(read(job_pod("train", i, 8, "tp=8,pp=4,dp=2")), all, kT0);
    ASSERT_EQ(r.passed.size(), 1U) << "pod " << i;
    EXPECT_TRUE(used.insert(r.passed[0]).second) << "two pods on one node";
    EXPECT_EQ(r.unresolvable.size(), all.size() - 1);
    EXPECT_EQ(r.unresolvable.begin()->second.find("job default/train reserves "), 0U);
  }
  auto k = s.counts();
  EXPECT_EQ(k.free, 96 - 64);
  EXPECT_EQ(k.placed, 1U);
  // The placement keeps every TP group (8 ranks) inside one node's HCCS mesh.
  auto pl = s.placement_of("default", "train");
  ASSERT_TRUE(pl.ok());
  EXPECT_EQ((*pl)["tp_groups_outside_hccs"], 0);
}

TEST(Filter, AJobThatDoesNotFitReservesNothing) {
  auto c = small_cluster(12);
  Scheduler s(c);
  auto all = names(c);
  s.filter(read(job_pod("a", 0, 8, "tp=8,pp=4,dp=2")), all, kT0);
  auto before = s.save();
  auto r = s.filter(read(job_pod("b", 0, 8, "tp=8,pp=4,dp=2")), all, kT0);
  EXPECT_TRUE(r.passed.empty());
  ASSERT_EQ(r.failed.size(), all.size());
  EXPECT_NE(r.failed.begin()->second.find("job default/b (tp=8,pp=4,dp=2 over 8 pods of 8) cannot be placed"),
            std::string::npos)
      << r.failed.begin()->second;
  EXPECT_EQ(s.counts().free, 32);
  EXPECT_EQ(s.counts().refused, 1U);
  json after = s.save();
  after["refused"] = before["refused"];
  EXPECT_EQ(after, before) << "a refused job changes nothing but the refusal count";
}

TEST(Filter, AJobOnlyUsesTheCandidateNodes) {
  auto c = small_cluster(4);
  Scheduler s(c);
  auto r = s.filter(read(job_pod("t", 0, 8, "tp=8,dp=2")), {"node-2", "node-3"}, kT0);
  ASSERT_EQ(r.passed.size(), 1U);
  auto pl = s.placement_of("default", "t");
  std::set<std::string> nodes;
  for (const auto& rk : (*pl)["ranks"]) nodes.insert(rk["node"].get<std::string>());
  EXPECT_EQ(nodes, (std::set<std::string>{"node-2", "node-3"}));
}

TEST(Filter, PodsOfAJobThatDisagreeOrAskForVnpusAreRefusedWithTheReason) {
  auto c = small_cluster(4);
  Scheduler s(c);
  auto all = names(c);
  s.filter(read(job_pod("t", 0, 8, "tp=8,dp=2")), all, kT0);
  auto r = s.filter(read(job_pod("t", 1, 8, "tp=4,dp=4")), all, kT0);
  EXPECT_TRUE(r.passed.empty());
  EXPECT_NE(r.unresolvable.at("node-0").find("was placed as tp=8,pp=1,dp=2 over 2 pods of 8"),
            std::string::npos);
  json v = job_pod("v", 0, 0, "tp=1,dp=2", 2);
  v["spec"]["containers"][0]["resources"]["limits"] = {{"huawei.com/Ascend910-10c.3cpu.32g", "1"}};
  auto rv = s.filter(read(v), all, kT0);
  EXPECT_NE(rv.unresolvable.at("node-0").find("a multi-pod job cannot use vNPUs"), std::string::npos);
  auto ri = s.filter(read(job_pod("t", 2, 8, "tp=8,dp=2")), all, kT0);
  EXPECT_EQ(ri.unresolvable.at("node-0"), "pod index 2 is outside the job's 2 pods");
  // A job pod whose chips come from a DRA claim, with no API server to read the claim from (no NPU resource
  // and no chips from claims): refused, saying what a job pod must ask.
  json d = job_pod("d", 0, 0, "tp=8,dp=2", 2);
  d["spec"]["containers"][0]["resources"] = {{"claims", json::array({{{"name", "npus"}}})}};
  d["spec"]["resourceClaims"] = json::array({{{"name", "npus"}, {"resourceClaimTemplateName", "npu-8"}}});
  auto rd = s.filter(read(d), all, kT0);
  EXPECT_TRUE(rd.passed.empty());
  EXPECT_EQ(rd.unresolvable.at("node-3"),
            "a pod of a job must ask for whole chips: huawei.com/Ascend910 or huawei.com/Ascend310P, or "
            "ResourceClaims for chips of the DeviceClass npu.ascend.huawei.com (read from the API server)");
}

TEST(Bind, AJobPodBindsOnlyToItsReservedNode) {
  auto c = small_cluster(4);
  Scheduler s(c);
  auto r = s.filter(read(job_pod("t", 1, 8, "tp=8,dp=2")), names(c), kT0);
  std::string mine = r.passed.at(0);
  std::string other = mine == "node-0" ? "node-1" : "node-0";
  auto wrong = s.bind("default", "t-1", "u", other, kT0);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().message(), "pod default/t-1 is reserved on " + mine + ", not " + other);
  EXPECT_TRUE(s.bind("default", "t-1", "u", mine, kT0).ok());
  EXPECT_TRUE(s.bind("default", "t-1", "u", mine, kT0).ok()) << "a retried bind is fine";
}

// The kubelet does not say which pod an Allocate is for: two pods of different jobs waiting on one node for
// as many chips could swap reservations (and rank tables), so the second bind waits for the first Allocate.
TEST(Bind, APodWaitsWhileAnotherJobsPodOfItsSizeWaitsOnTheNode) {
  auto c = small_cluster(1);
  Scheduler s(c);
  s.filter(read(job_pod("a", 0, 4, "tp=4")), {"node-0"}, kT0);
  s.filter(read(job_pod("b", 0, 4, "tp=4")), {"node-0"}, kT0);
  s.filter(read(plain_pod("p", 4)), {"node-0"}, kT0);
  ASSERT_TRUE(s.bind("default", "a-0", "", "node-0", kT0).ok());
  auto b = s.bind("default", "b-0", "", "node-0", kT0);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code(), EBUSY);
  EXPECT_EQ(b.error().message(),
            "pod default/a-0 on node-0 waits for its 4 chips: default/b-0 binds once they are allocated (the "
            "kubelet "
            "cannot tell two reservations of one size apart)");
  EXPECT_EQ(s.bind("default", "p", "", "node-0", kT0).error().code(), EBUSY);
  auto a_chips = s.reservations("node-0")->at(0).chips;
  ASSERT_TRUE(s.take_allocation("node-0", a_chips, kT0).ok());
  EXPECT_TRUE(s.bind("default", "b-0", "", "node-0", kT0).ok()) << "a's chips are allocated: b may bind";
  // A reservation bound longer than the TTL and never allocated no longer holds others back.
  EXPECT_TRUE(
      s.bind("default", "p", "", "node-0", kT0 + std::chrono::minutes(6)).error().message().find("free") !=
      std::string::npos)
      << "p passes the wait (b-0 is stale) and then finds no free chips";
}

TEST(Bind, PodsWithoutAJobOfOneSizeBindTogetherButAJobPodWaitsForThem) {
  auto c = small_cluster(1);
  Scheduler s(c);
  for (const char* p : {"q", "r"}) s.filter(read(plain_pod(p, 2)), {"node-0"}, kT0);
  s.filter(read(job_pod("j", 0, 2, "tp=2")), {"node-0"}, kT0);
  EXPECT_TRUE(s.bind("default", "q", "", "node-0", kT0).ok());
  EXPECT_TRUE(s.bind("default", "r", "", "node-0", kT0).ok())
      << "pods without a job may swap chips harmlessly";
  auto j = s.bind("default", "j-0", "", "node-0", kT0);
  EXPECT_EQ(j.error().code(), EBUSY) << "a job pod's rank table must not go to q or r";
}

// The env of pod N: ranks N*8 .. N*8+7 of a 16-rank job over 2 pods, and the rank table's entries on those
// chips carry exactly those ranks in device_id order.
TEST(Allocation, TheContainerGetsItsRanksAndTheJobsRankTable) {
  auto c = small_cluster(4);
  Scheduler s(c);
  auto all = names(c);
  std::string node1;
  for (int i = 0; i < 2; ++i) {
    auto r = s.filter(read(job_pod("t", i, 8, "tp=8,dp=2")), all, kT0);
    ASSERT_TRUE(s.bind("default", "t-" + std::to_string(i), "", r.passed.at(0), kT0).ok());
    if (i == 1) node1 = r.passed[0];
  }
  auto res = s.reservations(node1);
  ASSERT_EQ(res->size(), 1U);
  EXPECT_EQ((*res)[0].pod, "t-1");
  EXPECT_EQ((*res)[0].chips, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  auto g = s.take_allocation(node1, {7, 6, 5, 4, 3, 2, 1, 0}, kT0);
  ASSERT_TRUE(g.ok()) << g.error().message();
  std::map<std::string, std::string> want = {
      {"ASCEND_JOB", "t"}, {"RANK_TABLE_FILE", "/etc/ascend/hccl.json"},
      {"RANK_SIZE", "16"}, {"WORLD_SIZE", "16"},
      {"RANK_START", "8"}, {"NODE_RANK", "1"},
      {"NNODES", "2"},     {"NPROC_PER_NODE", "8"}};
  EXPECT_EQ(g->env, want);
  ASSERT_TRUE(g->ranktable.has_value());
  std::vector<std::pair<int, int>> by_device;  // (device_id, rank_id) on node1
  for (const auto& srv : (*g->ranktable)["server_list"]) {
    if (srv["server_id"] != node1) continue;
    for (const auto& d : srv["device"]) {
      by_device.emplace_back(std::stoi(d["device_id"].get<std::string>()),
                             std::stoi(d["rank_id"].get<std::string>()));
    }
  }
  std::sort(by_device.begin(), by_device.end());
  std::vector<int> ranks;
  for (auto [dev, rank] : by_device) ranks.push_back(rank);
  EXPECT_EQ(ranks, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_TRUE(s.reservations(node1)->empty()) << "an allocated reservation is no longer pending";
  // The plugin's Allocate failed after taking it: the pod waits for the same chips again.
  EXPECT_EQ(s.return_allocation(node1, {0, 1}, kT0).error().code(), ENOENT);
  ASSERT_TRUE(s.return_allocation(node1, {3, 2, 1, 0, 4, 5, 6, 7}, kT0).ok());
  EXPECT_EQ(s.reservations(node1)->size(), 1U);
  ASSERT_TRUE(s.take_allocation(node1, {0, 1, 2, 3, 4, 5, 6, 7}, kT0).ok());
  EXPECT_EQ(s.take_allocation(node1, {0, 1}, kT0).error().code(), ENOENT);
}

TEST(Allocation, AFaultOnAReservedChipMakesThatPodFailWithAReason) {
  auto c = small_cluster(2);
  Scheduler s(c);
  auto r = s.filter(read(job_pod("t", 0, 4, "tp=4,dp=2")), names(c), kT0);
  std::string node = r.passed.at(0);
  ASSERT_TRUE(s.bind("default", "t-0", "", node, kT0).ok());
  auto chips = s.reservations(node)->at(0).chips;
  Inventory inv{"huawei.com/Ascend910", {}};
  for (int p = 0; p < 8; ++p) inv.chips.push_back({p, p != chips[1], false});
  ASSERT_TRUE(s.put_inventory(node, inv, kT0).ok());
  auto before = s.save();
  std::vector<int> others;
  for (int p = 0; p < 8 && others.size() < 4; ++p) {
    if (std::find(chips.begin(), chips.end(), p) == chips.end()) others.push_back(p);
  }
  auto g = s.take_allocation(node, others, kT0);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), EBUSY);
  EXPECT_NE(g.error().message().find("(unhealthy now: " + std::to_string(chips[1]) + ")"), std::string::npos)
      << g.error().message();
  EXPECT_EQ(s.save(), before) << "nothing else changes";
}

TEST(Release, FreesThePodsChipsAndTheJobGoesWithItsLastPod) {
  auto c = small_cluster(2);
  Scheduler s(c);
  auto all = names(c);
  for (int i = 0; i < 2; ++i) {
    auto r = s.filter(read(job_pod("t", i, 8, "tp=8,dp=2")), all, kT0);
    ASSERT_TRUE(s.bind("default", "t-" + std::to_string(i), "", r.passed.at(0), kT0).ok());
  }
  EXPECT_EQ(s.counts().free, 0);
  ASSERT_TRUE(s.release("default", "t-0", kT0).ok());
  EXPECT_EQ(s.counts().free, 8);
  EXPECT_EQ(s.counts().jobs, 1);
  ASSERT_TRUE(s.release("default", "t-1", kT0).ok());
  EXPECT_EQ(s.counts().free, 16);
  EXPECT_EQ(s.counts().jobs, 0);
  EXPECT_EQ(s.release("default", "t-1", kT0).error().code(), ENOENT);
  // Placed again from scratch.
  auto r = s.filter(read(job_pod("t", 0, 8, "tp=8,dp=2")), all, kT0);
  EXPECT_EQ(r.passed.size(), 1U);
  EXPECT_EQ(s.counts().placed, 2U);
}

TEST(Expire, AReservationNeverBoundExpiresAfterTheTtl) {
  auto c = small_cluster(2);
  Scheduler s(c, std::chrono::minutes(5));
  auto all = names(c);
  auto r = s.filter(read(job_pod("t", 0, 8, "tp=8,dp=2")), all, kT0);
  ASSERT_TRUE(s.bind("default", "t-0", "", r.passed.at(0), kT0).ok());
  EXPECT_EQ(s.expire(kT0 + std::chrono::minutes(4)), 0);
  EXPECT_EQ(s.counts().free, 0);
  EXPECT_EQ(s.expire(kT0 + std::chrono::minutes(5)), 1) << "pod 1 never bound";
  EXPECT_EQ(s.counts().free, 8);
  EXPECT_EQ(s.counts().jobs, 1) << "pod 0 is bound: the job stays";
  // Pod 1 comes late: its chips are free again, so it takes them back.
  auto late = s.filter(read(job_pod("t", 1, 8, "tp=8,dp=2")), all, kT0 + std::chrono::minutes(6));
  EXPECT_EQ(late.passed.size(), 1U);
  EXPECT_EQ(s.counts().free, 0);
}

// Issue 22: a job whose pods are only partly bound keeps the bound pods' chips, and its pods without chips
// are placed again around them. A job of 4 pods of 8 (tp 8, dp 4) on 7 nodes: node-0..5 on leaf-0, node-6 on
// leaf-1. Pods 0 and 1 bind; pods 2 and 3 expire and pods without a job take their nodes. Pod 2 comes back:
// the DP rings cross the job's nodes, over the leaf (25 GB/s) inside leaf-0 and over the spine (12.5 GB/s)
// to node-6, so pods 2 and 3 go to the two free nodes of leaf-0.
TEST(Filter, APartlyBoundJobKeepsItsBoundPodsAndPlacesTheOthersAgain) {
  auto c = small_cluster(7);
  Scheduler s(c, std::chrono::minutes(5));
  auto all = names(c);
  std::vector<std::string> at;  // node of each pod
  for (int i = 0; i < 4; ++i) {
    auto r = s.filter(read(job_pod("t", i, 8, "tp=8,dp=4")), all, kT0);
    ASSERT_EQ(r.passed.size(), 1U);
    at.push_back(r.passed[0]);
  }
  std::set<std::string> leaf0_free = {"node-0", "node-1", "node-2", "node-3", "node-4", "node-5"};
  for (const auto& n : at) ASSERT_EQ(leaf0_free.erase(n), 1U) << "the job starts inside leaf-0";
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(s.bind("default", "t-" + std::to_string(i), "", at[i], kT0).ok());
  auto kept0 = s.reservations(at[0])->at(0).chips;
  auto kept1 = s.reservations(at[1])->at(0).chips;
  EXPECT_EQ(s.expire(kT0 + std::chrono::minutes(5)), 2) << "pods 2 and 3 never bound";
  const auto later = kT0 + std::chrono::minutes(6);
  for (int i = 2; i < 4; ++i) {
    std::string other = "other-" + std::to_string(i);
    ASSERT_EQ(s.filter(read(plain_pod(other, 8)), {at[i]}, later).passed.size(), 1U);
    ASSERT_TRUE(s.bind("default", other, "", at[i], later).ok());
  }
  const auto version = s.job_version("default", "t");
  auto r2 = s.filter(read(job_pod("t", 2, 8, "tp=8,dp=4")), all, later);
  ASSERT_EQ(r2.passed.size(), 1U) << (r2.failed.empty() ? "" : r2.failed.begin()->second);
  EXPECT_EQ(leaf0_free.count(r2.passed[0]), 1U) << r2.passed[0] << " is not a free node of leaf-0";
  auto r3 = s.filter(read(job_pod("t", 3, 8, "tp=8,dp=4")), all, later);
  ASSERT_EQ(r3.passed.size(), 1U);
  EXPECT_EQ(leaf0_free.count(r3.passed[0]), 1U) << r3.passed[0] << " is not a free node of leaf-0";
  EXPECT_NE(r2.passed[0], r3.passed[0]);
  EXPECT_GT(s.job_version("default", "t"), version);
  // The bound pods kept their chips.
  EXPECT_EQ(s.reservations(at[0])->at(0).chips, kept0);
  EXPECT_EQ(s.reservations(at[1])->at(0).chips, kept1);
  EXPECT_EQ(s.counts().free, 56 - 32 - 16);
  // The rank table and the env follow: ranks 16..23 on pod 2's new node, 24..31 on pod 3's.
  auto rt = s.ranktable_of("default", "t");
  ASSERT_TRUE(rt.ok());
  std::map<std::string, std::set<int>> ranks_on;
  for (const auto& srv : (*rt)["server_list"]) {
    for (const auto& d : srv["device"])
      ranks_on[srv["server_id"].get<std::string>()].insert(std::stoi(d["rank_id"].get<std::string>()));
  }
  auto span = [](int from) {
    std::set<int> out;
    for (int r = from; r < from + 8; ++r) out.insert(r);
    return out;
  };
  EXPECT_EQ(ranks_on[r2.passed[0]], span(16));
  EXPECT_EQ(ranks_on[r3.passed[0]], span(24));
  EXPECT_EQ(ranks_on[at[0]], span(0));
  EXPECT_EQ(ranks_on.count(at[2]), 0U) << "pod 2's old node is another pod's now";
  EXPECT_EQ(s.env_of("default", "t", 2)->at("RANK_START"), "16");
  ASSERT_TRUE(s.bind("default", "t-2", "", r2.passed[0], later).ok());
  auto g = s.take_allocation(r2.passed[0], {0, 1, 2, 3, 4, 5, 6, 7}, later);
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->env.at("RANK_START"), "16");
  EXPECT_EQ(g->pod, "t-2");
}

// When the pods without chips no longer fit, the pod is refused with the allocator's reason and nothing
// changes.
TEST(Filter, APartlyBoundJobWithNoRoomLeftIsRefusedWithTheReason) {
  auto c = small_cluster(4);
  Scheduler s(c, std::chrono::minutes(5));
  auto all = names(c);
  std::vector<std::string> at;
  for (int i = 0; i < 4; ++i)
    at.push_back(s.filter(read(job_pod("t", i, 8, "tp=8,dp=4")), all, kT0).passed.at(0));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(s.bind("default", "t-" + std::to_string(i), "", at[i], kT0).ok());
  s.expire(kT0 + std::chrono::minutes(5));
  const auto later = kT0 + std::chrono::minutes(6);
  for (int i = 2; i < 4; ++i) {
    std::string other = "other-" + std::to_string(i);
    s.filter(read(plain_pod(other, 8)), {at[i]}, later);
    ASSERT_TRUE(s.bind("default", other, "", at[i], later).ok());
  }
  auto before = s.save();
  auto r = s.filter(read(job_pod("t", 2, 8, "tp=8,dp=4")), all, later);
  EXPECT_TRUE(r.passed.empty());
  ASSERT_EQ(r.failed.size(), all.size());
  EXPECT_EQ(
      r.failed.at("node-0"),
      "the chips of pod 2 of job default/t (" + at[2] +
          " chips 0,1,2,3,4,5,6,7) are no longer free and its pods without chips cannot be placed again "
          "around the others (job t: needs 2 more pods of 8 NPUs, each on one node, around the 2 kept; "
          "the free chips hold 0); delete the job's pods to place it again");
  EXPECT_EQ(s.save(), before) << "a refusal changes nothing";
}

TEST(Prioritize, TheReservedNodeScoresTenAndPlainPodsPreferNotToBreakBlocks) {
  auto c = testing::make_cluster({{"empty", "atlas800-9000", "leaf-0", {}, {}},
                                  {"half", "atlas800-9000", "leaf-0", {0, 1, 2, 3}, {}},
                                  {"ring-broken", "atlas800-9000", "leaf-0", {0, 4}, {}}});
  Scheduler s(c);
  // 2 chips: on "empty" a whole ring of 4 is broken; on "half" a whole ring too (the other one is busy)...
  // ...while on "ring-broken" both rings already have 3 free: taking 2 of one breaks nothing whole.
  auto sc = s.prioritize(read(plain_pod("p", 2)), {"empty", "half", "ring-broken"});
  ASSERT_EQ(sc.size(), 3U);
  // empty: 1 ring broken (-4), 6 of 8 left free (-ceil(5*6/8)=-4): 2. half: 1 broken, 2 left (-2): 4.
  // ring-broken: 0 broken, 4 left (-3): 7.
  EXPECT_EQ(sc[0].score, 2);
  EXPECT_EQ(sc[1].score, 4);
  EXPECT_EQ(sc[2].score, 7);
  // The scores alone (what the server writes its answer from) are prioritize's, in the same order.
  const std::vector<std::string_view> names = {"empty", "half", "ring-broken"};
  EXPECT_EQ(s.scores(read(plain_pod("p", 2)), names), (std::vector<int>{2, 4, 7}));
  EXPECT_EQ(s.scores(read(plain_pod("p", 2)), {}), std::vector<int>{});
  auto r = s.filter(read(job_pod("t", 0, 8, "tp=8")), {"empty", "half", "ring-broken"}, kT0);
  auto js = s.prioritize(read(job_pod("t", 0, 8, "tp=8")), {"empty", "half", "ring-broken"});
  EXPECT_EQ(js[0].score, 10);
  EXPECT_EQ(js[1].score, 0);
  EXPECT_EQ(js[2].score, 0);
  EXPECT_EQ(s.scores(read(job_pod("t", 0, 8, "tp=8")), names), (std::vector<int>{10, 0, 0}));
  // The job holds "empty" now: a plain pod fits there no more.
  EXPECT_EQ(s.scores(read(plain_pod("p", 2)), names), (std::vector<int>{0, 4, 7}));
}

// The names' indices are kept from one list to the next (the same list again; the last one with names left
// out, as kube-scheduler's /prioritize follows its /filter): whatever lists follow one another, each is
// answered as a scheduler seeing it first answers it.
TEST(Prioritize, ListsThatFollowOneAnotherAreAnsweredAsIfEachCameFirst) {
  std::vector<testing::NodeLine> lines;
  for (int i = 0; i < 8; ++i) {
    std::vector<int> busy(static_cast<std::size_t>(i % 5));  // chips 0..i%5-1 in use
    std::iota(busy.begin(), busy.end(), 0);
    lines.push_back({"node-" + std::to_string(i), "atlas800t-a2", "leaf-0", busy, {}});
  }
  auto c = testing::make_cluster(lines);
  Scheduler s(c);
  const std::vector<std::vector<std::string>> lists = {
      {"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"},
      {"node-1", "node-3", "node-6"},  // the last, some left out
      {"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"},
      {"node-3", "node-1"},           // out of order: looked up
      {"node-1", "ghost", "node-6"},  // a name the last list lacks
      {},
      {"node-7", "node-6", "node-5", "node-4", "node-3", "node-2", "node-1", "node-0"},
      {"node-6", "node-6"},  // the last list has it once
      {"node-7", "node-7", "node-0"},
      {"node-2", "node-5", "node-0", "node-1", "node-3", "node-4", "node-6", "node-7"},
      {"node-5", "node-0", "node-4"},
  };
  for (std::size_t k = 0; k < lists.size(); ++k) {
    Scheduler fresh(c);
    auto got = s.prioritize(read(plain_pod("p", 2)), lists[k]);
    auto want = fresh.prioritize(read(plain_pod("p", 2)), lists[k]);
    ASSERT_EQ(got.size(), want.size()) << k;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].host, want[i].host) << k;
      EXPECT_EQ(got[i].score, want[i].score) << k << " " << got[i].host;
    }
    const std::vector<std::string_view> views(lists[k].begin(), lists[k].end());
    auto alone = s.scores(read(plain_pod("p", 2)), views);
    ASSERT_EQ(alone.size(), want.size()) << k;
    for (std::size_t i = 0; i < alone.size(); ++i) EXPECT_EQ(alone[i], want[i].score) << k << " " << views[i];
    auto f = s.filter(read(plain_pod("q", 4)), lists[k], kT0);
    auto g = fresh.filter(read(plain_pod("q", 4)), lists[k], kT0);
    EXPECT_EQ(f.passed, g.passed) << k;
    EXPECT_EQ(filter_result_json({}, f), filter_result_json({}, g)) << k;
  }
}

TEST(Inventory, ThePluginsReportDecidesWhatIsFreeAndMustMatchTheClusterFile) {
  auto c = small_cluster(1);
  Scheduler s(c);
  Inventory inv{"huawei.com/Ascend910", {}};
  for (int p = 0; p < 8; ++p) inv.chips.push_back({p, p != 7, p < 2});
  ASSERT_TRUE(s.put_inventory("node-0", inv, kT0).ok());
  EXPECT_EQ(s.counts().free, 5);
  EXPECT_EQ(s.counts().unhealthy, 1);
  EXPECT_EQ(s.put_inventory("ghost", inv, kT0).error().code(), ENOENT);
  inv.chips.push_back({8, true, false});
  EXPECT_EQ(s.put_inventory("node-0", inv, kT0).error().message(),
            "node node-0 (atlas800t-a2) has no chip 8");
  Inventory wrong{"huawei.com/Ascend310P", {}};
  EXPECT_NE(s.put_inventory("node-0", wrong, kT0)
                .error()
                .message()
                .find("the plugin reports huawei.com/Ascend310P"),
            std::string::npos);
}

TEST(State, SaveAndLoadKeepEverythingAndACorruptStateIsRefused) {
  auto c = small_cluster(4);
  Scheduler s(c);
  auto all = names(c);
  auto r = s.filter(read(job_pod("t", 0, 8, "tp=8,dp=2")), all, kT0);
  ASSERT_TRUE(s.bind("default", "t-0", "u0", r.passed.at(0), kT0).ok());
  s.filter(read(plain_pod("p", 2)), all, kT0);
  ASSERT_TRUE(s.bind("default", "p", "u1", "node-3", kT0).ok());
  json saved = s.save();
  Scheduler t(c);
  ASSERT_TRUE(t.load(saved).ok());
  EXPECT_EQ(t.save(), saved);
  EXPECT_EQ(t.counts().free, s.counts().free);
  EXPECT_EQ(*t.placement_of("default", "t"), *s.placement_of("default", "t"));
  struct Case {
    std::function<void(json&)> damage;
    std::string has;
  };
  std::vector<Case> cases = {
      {[](json& j) { j["schema"] = 2; }, "schema"},
      {[](json& j) { j["jobs"][0]["slots"][0]["node"] = "ghost"; }, "node ghost is not in the cluster file"},
      {[](json& j) { j["jobs"][0]["slots"][0]["state"] = "dancing"; }, "unknown slot state"},
      {[](json& j) { j["jobs"][0]["tp"] = "8"; }, "state.jobs[0].tp: wrong type"},
      {[](json& j) { j["jobs"][0]["ranks"].erase(0); }, "ranks: wrong count"},
      {[](json& j) { j["pods"][0]["chips"] = json::array({99}); }, "has no chip 99"},
      {[](json& j) { j.erase("jobs"); }, "state.jobs: missing"},
  };
  for (const auto& k : cases) {
    json bad = saved;
    k.damage(bad);
    Scheduler u(c);
    auto st = u.load(bad);
    ASSERT_FALSE(st.ok()) << k.has;
    EXPECT_NE(st.error().message().find(k.has), std::string::npos) << st.error().message();
    EXPECT_EQ(u.counts().free, 32) << "a failed load leaves the scheduler as it was";
  }
}

// ---- wire -----------------------------------------------------------------------------------------------

TEST(Wire, FilterAnswersInTheFormItWasAsked) {
  json node_a = {{"metadata", {{"name", "node-0"}, {"labels", {{"x", "y"}}}}}};
  json node_b = {{"metadata", {{"name", "node-1"}}}};
  json body = {{"Pod", plain_pod("p", 1)}, {"Nodes", {{"items", {node_a, node_b}}}}};
  auto a = parse_extender_args(body);
  ASSERT_TRUE(a.ok()) << a.error().message();
  FilterResult r{{"node-0"}, {{"node-1", "full"}}, {}};
  json out = filter_result_json(*a, r);
  EXPECT_EQ(out["Nodes"]["items"], json::array({node_a}));
  EXPECT_TRUE(out["NodeNames"].is_null());
  EXPECT_EQ(out["FailedNodes"], json({{"node-1", "full"}}));
  EXPECT_EQ(out["Error"], "");
  auto n = parse_extender_args({{"pod", plain_pod("p", 1)}, {"nodenames", {"node-1"}}});
  ASSERT_TRUE(n.ok());
  json out2 = filter_result_json(*n, FilterResult{{"node-1"}, {}, {}});
  EXPECT_EQ(out2["NodeNames"], json::array({"node-1"}));
  EXPECT_TRUE(out2["Nodes"].is_null());
  EXPECT_EQ(out2["FailedAndUnresolvableNodes"], json::object());
}

TEST(Wire, BindingArgsAndTheBindingObject) {
  auto b =
      parse_binding_args({{"podname", "t-0"}, {"PODNAMESPACE", "ml"}, {"PodUID", "u-1"}, {"Node", "n3"}});
  ASSERT_TRUE(b.ok());
  json want = {{"apiVersion", "v1"},
               {"kind", "Binding"},
               {"metadata", {{"name", "t-0"}, {"namespace", "ml"}, {"uid", "u-1"}}},
               {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "n3"}}}};
  EXPECT_EQ(binding_object(*b), want);
  EXPECT_FALSE(parse_binding_args({{"PodName", "x"}}).ok());
  EXPECT_FALSE(parse_binding_args({{"PodName", 1}, {"Node", "n"}}).ok());
}

// ---- limits (issue 31) ----------------------------------------------------------------------------------

// Kubernetes' rules (k8s.io/apimachinery/pkg/util/validation): a DNS-1123 label is 1..63 of [a-z0-9-],
// alphanumeric at both ends; a subdomain is 1..253 of such labels joined by '.'.
TEST(Limits, Dns1123LabelsAndSubdomainsAsKubernetesDefinesThem) {
  for (const std::string& ok :
       std::vector<std::string>{"a", "default", "kube-system", "a1", std::string(63, 'x')}) {
    EXPECT_TRUE(check_dns1123_label(ok, "f").ok()) << ok;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "-a", "a-", "A", "a.b", "a/b", "..", "a_b", std::string(64, 'x')}) {
    auto s = check_dns1123_label(bad, "Pod.metadata.namespace");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().message().rfind("Pod.metadata.namespace: ", 0), 0U) << s.error().message();
  }
  for (const std::string& ok :
       std::vector<std::string>{"node-0", "a.b.c", "n1.example.com", std::string(253, 'x')}) {
    EXPECT_TRUE(check_dns1123_subdomain(ok, "f").ok()) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{"", ".a", "a.", "a..b", "../x", "a/b", "Node", "a?b",
                                                         std::string(254, 'x')}) {
    EXPECT_FALSE(check_dns1123_subdomain(bad, "f").ok()) << bad;
  }
  auto big = check_dns1123_subdomain(std::string(8 << 20, 'x'), "Pod.metadata.name");
  ASSERT_FALSE(big.ok());
  EXPECT_LT(big.error().message().size(), 400U) << "the message does not carry the 8 MiB name";
}

TEST(Limits, TheRememberedPodsAreCappedAndTheOldestIsForgotten) {
  auto c = small_cluster(2);  // 16 chips: the cap is its floor, 1024
  Scheduler s(c);
  ASSERT_EQ(s.seen_cap(), 1024U);
  for (int i = 0; i < 1100; ++i) {
    s.filter(read(plain_pod("p" + std::to_string(i), 1)), {"node-0"}, kT0 + std::chrono::milliseconds(i));
  }
  EXPECT_EQ(s.seen_count(), 1024U);
  EXPECT_NE(s.bind("default", "p0", "", "node-0", kT0).error().message().find("unknown"), std::string::npos)
      << "the oldest were forgotten";
  EXPECT_TRUE(s.bind("default", "p1099", "", "node-0", kT0).ok()) << "the newest are remembered";
  // 5 000 nodes of 8 chips: one remembered pod per chip.
  auto big = topology::make_cluster("big", {}, topology::generate_nodes("atlas800t-a2", 5000, 16, 32, "n-"),
                                    topology::builtin_profiles());
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(Scheduler(*big).seen_cap(), 40000U);
}

TEST(Limits, AJobSizeThatOverflowsAnIntIsRefusedNotWrapped) {
  JobRecord j;
  j.spec.tp = 1 << 20;
  j.spec.pp = 1 << 20;
  j.spec.dp = 1 << 20;
  EXPECT_EQ(j.spec.npus(), std::int64_t{1} << 60);
  EXPECT_EQ(j.job().npus, std::numeric_limits<int>::max());
  auto c = small_cluster(2);
  Scheduler s(c);
  auto r = s.filter(read(job_pod("huge", 0, 8, "tp=1048576,pp=1048576", 2)), names(c), kT0);
  EXPECT_TRUE(r.passed.empty());
  ASSERT_EQ(r.unresolvable.size(), 2U);
  EXPECT_NE(r.unresolvable.begin()->second.find("tp x pp x dp = 1099511627776 is not 2 pods x 8 chips"),
            std::string::npos)
      << r.unresolvable.begin()->second;
  EXPECT_EQ(s.counts().free, 16);
}

TEST(Limits, ANodeListLongerThanTheClusterIsRefused) {
  json body = {{"Pod", plain_pod("p", 1)}, {"NodeNames", {"node-0", "node-1", "node-2"}}};
  EXPECT_TRUE(parse_extender_args(body, 3).ok());
  auto a = parse_extender_args(body, 2);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message(),
            "ExtenderArgs.NodeNames: 3 nodes, more than the 2 of the scheduler's cluster file");
  json full = {{"Pod", plain_pod("p", 1)},
               {"Nodes", {{"items", {{{"metadata", {{"name", "a"}}}}, {{"metadata", {{"name", "b"}}}}}}}}};
  EXPECT_FALSE(parse_extender_args(full, 1).ok());
}

// ---- DRA ResourceClaims ---------------------------------------------------------------------------------
// Pods whose chips come through DRA ResourceClaims: the chips the claims hold on a node (put_claimed) are
// never offered, and a pod bound with its claimed chips (bind's `claimed`) holds exactly those, whatever was
// planned. The plan (read from placement_of) is the input here; a pod's ranks go to its chips in ascending
// phy order.

const json& chip_of(const json& view, const std::string& node, int phy) {
  for (const auto& n : view["nodes"]) {
    if (n["name"] != node) continue;
    for (const auto& c : n["chips"]) {
      if (c["phy"] == phy) return c;
    }
  }
  static const json none;
  ADD_FAILURE() << "no chip " << phy << " on " << node;
  return none;
}

TEST(DraClaimed, ClaimedChipsAreNeverOfferedAndCountAsUsed) {
  auto c = small_cluster(2);  // 16 chips
  Scheduler s(c);
  const PodInfo whole = read(plain_pod("p", 8));
  // Asked once before the claim, so that the answer remembered for node-0 must notice the claim.
  ASSERT_EQ(s.filter(whole, {"node-0"}, kT0).passed, std::vector<std::string>{"node-0"});
  const json before = s.save();
  const auto changes = s.changes();
  ASSERT_TRUE(s.put_claimed("node-0", {5}).ok());
  EXPECT_EQ(s.changes(), changes + 1);
  ASSERT_TRUE(s.put_claimed("node-0", {5}).ok());
  EXPECT_EQ(s.changes(), changes + 1) << "the same set again is no change";

  auto r = s.filter(whole, {"node-0", "node-1"}, kT0);
  EXPECT_EQ(r.passed, std::vector<std::string>{"node-1"});
  EXPECT_EQ(r.failed.at("node-0"), "7 of 8 chips free (1 claimed through DRA); the pod needs 8");
  auto scores = s.prioritize(whole, {"node-0", "node-1"});
  EXPECT_EQ(scores.at(0).score, 0) << "the pod does not fit node-0";
  EXPECT_GT(scores.at(1).score, 0);
  EXPECT_EQ(s.counts().used, 1);
  EXPECT_EQ(s.counts().free, 15);
  json view = s.cluster_view();
  EXPECT_EQ(chip_of(view, "node-0", 5)["state"], "busy");
  EXPECT_EQ(chip_of(view, "node-0", 4)["state"], "free");
  EXPECT_EQ(view["chips"]["used"], 1);
  EXPECT_EQ(s.save(), before) << "the claims are the API server's: not saved";

  // Errors leave the set as it was.
  auto ghost = s.put_claimed("ghost", {0});
  EXPECT_EQ(ghost.error().code(), ENOENT);
  auto bad = s.put_claimed("node-0", {1, 8});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_EQ(bad.error().message(), "node node-0 (atlas800t-a2) has no chip 8: its DRA claims name it");
  EXPECT_EQ(s.counts().free, 15);

  // A load (the state file) keeps them: they are not its to say.
  ASSERT_TRUE(s.load(before).ok());
  EXPECT_EQ(s.counts().free, 15);

  ASSERT_TRUE(s.put_claimed("node-0", {}).ok());
  EXPECT_EQ(s.filter(whole, {"node-0"}, kT0).passed, std::vector<std::string>{"node-0"});
  EXPECT_EQ(s.counts().free, 16);
  EXPECT_EQ(s.counts().used, 0);
}

// A 2-pod job (tp 2, dp 2: pods of 2) planned on node-0 alone; its pods' claims name other chips of node-0.
TEST(DraBind, AJobPodTakesItsClaimedChipsAndTheRankTableFollows) {
  auto c = testing::make_cluster({{"node-0", "atlas800t-a2", "leaf-0", {}, {}},
                                  {"node-1", "atlas800t-a2", "leaf-0", {}, {}},
                                  {"node-2", "atlas800t-a3", "leaf-0", {}, {}}});  // chips 0..15
  Scheduler s(c);
  for (int i = 0; i < 2; ++i) {
    auto r = s.filter(read(job_pod("t", i, 2, "tp=2,dp=2")), {"node-0"}, kT0);
    ASSERT_EQ(r.passed, std::vector<std::string>{"node-0"});
  }
  auto pl = s.placement_of("default", "t");
  ASSERT_TRUE(pl.ok());
  const auto p0 = (*pl)["pods"][0]["chips"].get<std::vector<int>>();
  const auto p1 = (*pl)["pods"][1]["chips"].get<std::vector<int>>();
  ASSERT_EQ(p0.size(), 2U);
  ASSERT_EQ(p1.size(), 2U);
  std::vector<int> unplanned;  // the 4 chips of node-0 the plan left free, ascending
  for (int p = 0; p < 8; ++p) {
    if (std::count(p0.begin(), p0.end(), p) + std::count(p1.begin(), p1.end(), p) == 0)
      unplanned.push_back(p);
  }
  ASSERT_EQ(unplanned.size(), 4U);

  // Pod 1's claims are its plan; pod 0's keep p0[1] and trade p0[0] for unplanned[0].
  const std::vector<int> claim1 = p1;
  ASSERT_TRUE(s.bind("default", "t-1", "u1", "node-0", kT0, &claim1).ok());
  std::vector<int> claim0 = {unplanned[0], p0[1]};  // any order
  std::vector<int> want0 = claim0;
  std::sort(want0.begin(), want0.end());

  struct Bad {
    std::string node;
    std::vector<int> claim;
    int code;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"node-0",
       {unplanned[0]},
       EINVAL,
       "pod default/t-0 asks for 2 chips; its DRA claims on node-0 name 1 (" + std::to_string(unplanned[0]) +
           ")"},
      {"node-0", {unplanned[0], p0[1], unplanned[1]}, EINVAL, "pod default/t-0 asks for 2 chips"},
      {"node-0",
       {unplanned[0], 12},
       EINVAL,
       "the DRA claims of pod default/t-0 name chip 12, which node-0 (atlas800t-a2) does not have"},
      {"node-0",
       {unplanned[0], p1[0]},
       EBUSY,
       "the DRA claims of pod default/t-0 name chips " + std::to_string(p1[0]) +
           " of node-0, which pod default/t-1 of job default/t holds"},
      {"node-1", claim0, EINVAL, "pod default/t-0 is reserved on node-0, not node-1"},
  };
  for (const auto& b : bad) {
    auto st = s.bind("default", "t-0", "u0", b.node, kT0, &b.claim);
    ASSERT_FALSE(st.ok()) << b.message;
    EXPECT_EQ(st.error().code(), b.code) << st.error().message();
    EXPECT_EQ(st.error().message().rfind(b.message, 0), 0U) << st.error().message();
  }
  EXPECT_EQ((*s.placement_of("default", "t"))["pods"][0]["chips"].get<std::vector<int>>(), p0)
      << "a refused bind changes nothing";

  ASSERT_TRUE(s.bind("default", "t-0", "u0", "node-0", kT0, &claim0).ok());
  pl = s.placement_of("default", "t");
  EXPECT_EQ((*pl)["pods"][0]["chips"].get<std::vector<int>>(), want0);
  EXPECT_EQ((*pl)["pods"][0]["state"], "allocated");
  EXPECT_EQ((*pl)["pods"][1]["chips"].get<std::vector<int>>(), p1);
  EXPECT_EQ((*pl)["pods"][1]["state"], "allocated");
  EXPECT_TRUE(s.reservations("node-0")->empty()) << "no Allocate is awaited for a DRA pod";
  EXPECT_EQ(s.counts().running_jobs, 1);
  EXPECT_EQ(s.counts().pending_jobs, 0);

  // The record (the job's ConfigMap) and the rank table name the claimed chips: ranks 0, 1 on want0.
  auto rec = s.job_record("default", "t");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ((*rec)["slots"][0]["chips"], json(want0));
  EXPECT_EQ((*rec)["slots"][0]["state"], "allocated");
  EXPECT_EQ((*rec)["slots"][0]["uid"], "u0");
  EXPECT_EQ((*rec)["ranks"][0], json({"node-0", want0[0]}));
  EXPECT_EQ((*rec)["ranks"][1], json({"node-0", want0[1]}));
  EXPECT_EQ((*rec)["ranks"][2], json({"node-0", p1[0]}));
  auto rt = s.ranktable_of("default", "t");
  ASSERT_TRUE(rt.ok());
  std::map<int, int> rank_of;  // device_id -> rank_id on node-0
  for (const auto& srv : (*rt)["server_list"]) {
    ASSERT_EQ(srv["server_id"], "node-0");
    for (const auto& d : srv["device"])
      rank_of[std::stoi(d["device_id"].get<std::string>())] = std::stoi(d["rank_id"].get<std::string>());
  }
  std::map<int, int> want_ranks = {{want0[0], 0}, {want0[1], 1}, {p1[0], 2}, {p1[1], 3}};
  EXPECT_EQ(rank_of, want_ranks);
  // A record read back (another replica) holds the same chips.
  Scheduler other(c);
  ASSERT_TRUE(other.observe_job(*rec, kT0).ok());
  EXPECT_EQ(other.held_by("default", "t-0")->chips, want0);
  json view = s.cluster_view();
  EXPECT_EQ(chip_of(view, "node-0", unplanned[0])["pod"], "t-0");
  EXPECT_EQ(chip_of(view, "node-0", unplanned[0])["state"], "allocated");
  EXPECT_EQ(chip_of(view, "node-0", p0[0])["state"], "free");

  // p0[0], planned for t-0 and not claimed, is free again: a plain pod of 4 takes it and the 3 unplanned
  // left.
  ASSERT_EQ(s.filter(read(plain_pod("p", 4)), {"node-0"}, kT0).passed, std::vector<std::string>{"node-0"});
  ASSERT_TRUE(s.bind("default", "p", "up", "node-0", kT0).ok());
  std::vector<int> want_p = {p0[0], unplanned[1], unplanned[2], unplanned[3]};
  std::sort(want_p.begin(), want_p.end());
  EXPECT_EQ(s.held_by("default", "p")->chips, want_p);
  EXPECT_EQ(s.counts().free, 8 + 16) << "node-0 is full; node-1 and node-2 are free";

  // A retried bind naming a chip of p: busy, naming p.
  std::vector<int> onto_p = {p0[1], unplanned[1]};
  auto busy = s.bind("default", "t-0", "u0", "node-0", kT0, &onto_p);
  EXPECT_EQ(busy.error().code(), EBUSY);
  EXPECT_NE(busy.error().message().find("which pod default/p holds"), std::string::npos)
      << busy.error().message();
  EXPECT_TRUE(s.bind("default", "t-0", "u0", "node-0", kT0, &claim0).ok()) << "the same retry is fine";

  // Releasing t-0 frees exactly its claimed chips.
  ASSERT_TRUE(s.release("default", "t-0", kT0).ok());
  ASSERT_TRUE(s.release("default", "p", kT0).ok());
  ASSERT_TRUE(s.release("default", "t-1", kT0).ok());
  EXPECT_EQ(s.counts().free, 32);
  EXPECT_EQ(s.counts().used, 0);
}

// kube-scheduler's allocator does not know the plan: pod 0's claims may name chips planned for pod 1, not
// bound yet. Pod 1's reservation then takes the chips pod 0 leaves; another job's reservation does not give
// way.
TEST(DraBind, ChipsPlannedForAnUnboundPodOfTheJobAreTakenAndThatPodGetsTheOnesLeft) {
  auto c = small_cluster(1);
  Scheduler s(c);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(s.filter(read(job_pod("t", i, 2, "tp=2,dp=2")), {"node-0"}, kT0).passed.size(), 1U);
  ASSERT_EQ(s.filter(read(job_pod("u", 0, 2, "tp=2")), {"node-0"}, kT0).passed.size(), 1U);
  auto pl = s.placement_of("default", "t");
  const auto p0 = (*pl)["pods"][0]["chips"].get<std::vector<int>>();
  const auto p1 = (*pl)["pods"][1]["chips"].get<std::vector<int>>();
  const auto u0 = (*s.placement_of("default", "u"))["pods"][0]["chips"].get<std::vector<int>>();
  ASSERT_EQ(p0.size() + p1.size() + u0.size(), 6U);

  const std::vector<int> on_u = {p0[0], u0[1]};
  auto busy = s.bind("default", "t-0", "u0", "node-0", kT0, &on_u);
  EXPECT_EQ(busy.error().code(), EBUSY);
  EXPECT_EQ(busy.error().message(), "the DRA claims of pod default/t-0 name chips " + std::to_string(u0[1]) +
                                        " of node-0, which the reservation of pod 0 of job default/u holds");

  const std::vector<int> claim = {p1[0], p0[0]};
  ASSERT_TRUE(s.bind("default", "t-0", "u0", "node-0", kT0, &claim).ok());
  std::vector<int> want0 = {p0[0], p1[0]};
  std::vector<int> want1 = {p0[1], p1[1]};  // pod 1 keeps p1[1] and gets p0[1], which pod 0 left
  std::sort(want0.begin(), want0.end());
  std::sort(want1.begin(), want1.end());
  pl = s.placement_of("default", "t");
  EXPECT_EQ((*pl)["pods"][0]["chips"].get<std::vector<int>>(), want0);
  EXPECT_EQ((*pl)["pods"][1]["chips"].get<std::vector<int>>(), want1);
  EXPECT_EQ((*pl)["pods"][1]["state"], "reserved");
  auto rec = s.job_record("default", "t");
  EXPECT_EQ((*rec)["ranks"][2], json({"node-0", want1[0]}));
  EXPECT_EQ((*rec)["ranks"][3], json({"node-0", want1[1]}));
  EXPECT_EQ(s.counts().free, 2);
  // Pod 1 bound the device plugin's way waits for its new chips.
  ASSERT_TRUE(s.bind("default", "t-1", "u1", "node-0", kT0).ok());
  auto res = s.reservations("node-0");
  ASSERT_EQ(res->size(), 1U);
  EXPECT_EQ(res->at(0).chips, want1);
  ASSERT_TRUE(s.take_allocation("node-0", want1, kT0).ok());
  // The held chips are exactly the three pods': the 2 left are free, and a pod of 2 gets them.
  std::vector<int> rest;
  for (int p = 0; p < 8; ++p) {
    bool held = std::count(want0.begin(), want0.end(), p) + std::count(want1.begin(), want1.end(), p) +
                    std::count(u0.begin(), u0.end(), p) >
                0;
    if (!held) rest.push_back(p);
  }
  ASSERT_EQ(s.filter(read(plain_pod("p", 2)), {"node-0"}, kT0).passed.size(), 1U);
  ASSERT_TRUE(s.bind("default", "p", "up", "node-0", kT0).ok());
  EXPECT_EQ(s.held_by("default", "p")->chips, rest);
  EXPECT_EQ(s.counts().free, 0);
}

TEST(DraBind, APodWithoutAJobTakesItsClaimedChipsWithoutWaiting) {
  auto c = small_cluster(1);
  Scheduler s(c);
  // A job pod of 2 bound the device plugin's way waits for its Allocate on node-0...
  ASSERT_EQ(s.filter(read(job_pod("a", 0, 2, "tp=2")), {"node-0"}, kT0).passed.size(), 1U);
  ASSERT_TRUE(s.bind("default", "a-0", "", "node-0", kT0).ok());
  const std::vector<int> a = s.held_by("default", "a-0")->chips;
  ASSERT_EQ(a.size(), 2U);
  std::vector<int> rest;  // node-0's other 6 chips
  for (int p = 0; p < 8; ++p) {
    if (std::find(a.begin(), a.end(), p) == a.end()) rest.push_back(p);
  }
  // ...which holds back a pod of 2 bound that way, but not one whose chips come from its claims.
  ASSERT_EQ(s.filter(read(plain_pod("d", 2)), {"node-0"}, kT0).passed.size(), 1U);
  const std::vector<int> wrong_count = {rest[0]};
  EXPECT_EQ(s.bind("default", "d", "ud", "node-0", kT0, &wrong_count).error().code(), EINVAL);
  const std::vector<int> on_a = {rest[0], a[1]};
  auto busy = s.bind("default", "d", "ud", "node-0", kT0, &on_a);
  EXPECT_EQ(busy.error().code(), EBUSY);
  EXPECT_NE(busy.error().message().find("pod default/a-0 of job default/a holds"), std::string::npos)
      << busy.error().message();
  const std::vector<int> claim = {rest[5], rest[4]};
  ASSERT_TRUE(s.bind("default", "d", "ud", "node-0", kT0, &claim).ok());
  EXPECT_EQ(s.held_by("default", "d")->chips, (std::vector<int>{rest[4], rest[5]}));
  EXPECT_EQ(chip_of(s.cluster_view(), "node-0", rest[4])["state"], "allocated");
  EXPECT_EQ(s.counts().free, 4);
  // Its chips are held: a pod of 5 does not fit the 4 left.
  auto r = s.filter(read(plain_pod("q", 5)), {"node-0"}, kT0);
  EXPECT_EQ(r.failed.at("node-0"), "4 of 8 chips free (4 reserved for pods); the pod needs 5");
  ASSERT_TRUE(s.release("default", "d", kT0).ok());
  EXPECT_EQ(s.counts().free, 6);
}

}  // namespace
}  // namespace ascend::scheduler
