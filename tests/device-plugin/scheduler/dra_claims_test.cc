// What the extender reads of DRA ResourceClaims (dra_claims.h). The claims are written by hand in the shape
// of resource.k8s.io/v1 (ResourceClaim, DeviceRequest, AllocationResult) as the API reference gives it, with
// the device names our driver publishes (docs/dra.md: `npu-<phy>`, `npu-<phy>-<template>-<k>`).
#include "ascend/scheduler/dra_claims.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ascend::scheduler {
namespace {

using nlohmann::json;

json claim(const std::string& name, json requests) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata",
           {{"name", name},
            {"namespace", "train"},
            {"uid", "6f1c2a3b-0000-4000-8000-000000000001"},
            {"managedFields", json::array()}}},
          {"spec", {{"devices", {{"requests", std::move(requests)}}}}}};
}

json exactly(const std::string& cls, json count = nullptr, const std::string& mode = "") {
  json e = {{"deviceClassName", cls}};
  if (!count.is_null()) e["count"] = count;
  if (!mode.empty()) e["allocationMode"] = mode;
  return {{"name", "npus"}, {"exactly", e}};
}

json allocated(json c, const std::string& node, const std::vector<std::string>& devices,
               const std::string& driver = "npu.ascend.huawei.com") {
  json results = json::array();
  for (const auto& d : devices)
    results.push_back({{"request", "npus"}, {"driver", driver}, {"pool", node}, {"device", d}});
  c["status"]["allocation"]["devices"]["results"] = results;
  c["status"]["allocation"]["nodeSelector"] = json::object();
  return c;
}

TEST(DraClaims, ChipOfADeviceNameIsTheNumberAfterNpu) {
  auto chip = [](std::string_view d) {
    auto r = deviceinfo::chip_of_device(d);
    return r.ok() ? *r : -1;
  };
  EXPECT_EQ(chip("npu-0"), 0);
  EXPECT_EQ(chip("npu-15"), 15);
  EXPECT_EQ(chip("npu-3-vir05-1c-16g-3"), 3);  // a vNPU takes part of chip 3
  EXPECT_EQ(chip("gpu-0"), -1);
  EXPECT_EQ(chip("npu-"), -1);
  EXPECT_EQ(chip("npu-x"), -1);
  EXPECT_EQ(chip("npu-1-"), -1);
  EXPECT_EQ(chip("npu-1-VIR"), -1);  // not a DNS label
  // A chip id beyond what the scheduler keeps (0..1023) is refused where a claim is read.
  json big = allocated(claim("c", json::array()), "n", {"npu-2048"});
  auto r = read_claim(big);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("chip 2048"), std::string::npos) << r.error().message();
}

TEST(DraClaims, ExactCountRequestsOfTheChipClassAreCounted) {
  // count defaults to 1, allocationMode to ExactCount; another driver's class asks nothing of ours.
  auto c = read_claim(claim("c", json::array({exactly("npu.ascend.huawei.com", 4),
                                              exactly("npu.ascend.huawei.com", nullptr, "ExactCount"),
                                              exactly("gpu.example.com", 2)})));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->key(), "train/c");
  EXPECT_EQ(c->chips, 5);
  EXPECT_TRUE(c->unplannable.empty());
  EXPECT_FALSE(c->allocated);
  EXPECT_TRUE(c->phys.empty());
}

TEST(DraClaims, WhatAJobCannotBePlannedWithIsSaid) {
  auto all = read_claim(claim("all", json::array({exactly("npu.ascend.huawei.com", nullptr, "All")})));
  ASSERT_TRUE(all.ok());
  EXPECT_NE(all->unplannable.find("allocationMode All"), std::string::npos) << all->unplannable;
  auto vnpu = read_claim(claim("v", json::array({exactly("vir05-1c-16g.npu.ascend.huawei.com", 1)})));
  ASSERT_TRUE(vnpu.ok());
  EXPECT_NE(vnpu->unplannable.find("vNPUs"), std::string::npos) << vnpu->unplannable;
  auto first = read_claim(
      claim("f", json::array({{{"name", "npus"},
                               {"firstAvailable", json::array({{{"name", "eight"},
                                                                {"deviceClassName", "npu.ascend.huawei.com"},
                                                                {"count", 8}}})}}})));
  ASSERT_TRUE(first.ok());
  EXPECT_NE(first->unplannable.find("firstAvailable"), std::string::npos) << first->unplannable;
  // Kubernetes allows 8 alternatives a request.
  json nine = json::array();
  for (int i = 0; i < 9; ++i) nine.push_back({{"name", "a" + std::to_string(i)}, {"deviceClassName", "x"}});
  auto too_many = read_claim(claim("f9", json::array({{{"name", "npus"}, {"firstAvailable", nine}}})));
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message().find("firstAvailable: more than 8"), std::string::npos)
      << too_many.error().message();
}

TEST(DraClaims, TheAllocationGivesTheNodeAndItsChips) {
  json c = allocated(claim("c", json::array({exactly("npu.ascend.huawei.com", 3)})), "node-2",
                     {"npu-6", "npu-1", "npu-4-vir05-1c-16g-0"});
  // Another driver's device in the same claim is not ours.
  c["status"]["allocation"]["devices"]["results"].push_back(
      {{"request", "x"}, {"driver", "gpu.example.com"}, {"pool", "node-2"}, {"device", "gpu-0"}});
  auto r = read_claim(c);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->allocated);
  EXPECT_EQ(r->node, "node-2");
  EXPECT_EQ(r->phys, (std::vector<int>{1, 4, 6}));
}

TEST(DraClaims, MalformedOrOversizedClaimsAreRefusedNamingTheField) {
  EXPECT_FALSE(read_claim(json::array()).ok());
  EXPECT_FALSE(read_claim(json{{"metadata", {{"namespace", "x"}}}}).ok());  // no name
  json bad_name = claim("Not_A_Name", json::array());
  EXPECT_FALSE(read_claim(bad_name).ok());
  json count_str = claim("c", json::array({exactly("npu.ascend.huawei.com", "4")}));
  auto r = read_claim(count_str);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("count"), std::string::npos) << r.error().message();
  EXPECT_FALSE(read_claim(claim("c", json::array({exactly("npu.ascend.huawei.com", 0)}))).ok());
  // Kubernetes' limit: 32 requests a claim, 32 results an allocation.
  json many = json::array();
  for (int i = 0; i < 33; ++i) many.push_back(exactly("npu.ascend.huawei.com", 1));
  r = read_claim(claim("c", many));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("more than 32"), std::string::npos) << r.error().message();
  std::vector<std::string> devs;
  for (int i = 0; i < 33; ++i) devs.push_back("npu-" + std::to_string(i));
  EXPECT_FALSE(read_claim(allocated(claim("c", json::array()), "n", devs)).ok());
  // Our devices on two nodes, or a device name that is not a chip.
  json two = allocated(claim("c", json::array()), "a", {"npu-0"});
  two["status"]["allocation"]["devices"]["results"].push_back(
      {{"driver", "npu.ascend.huawei.com"}, {"pool", "b"}, {"device", "npu-1"}});
  EXPECT_FALSE(read_claim(two).ok());
  EXPECT_FALSE(read_claim(allocated(claim("c", json::array()), "a", {"davinci0"})).ok());
}

TEST(DraClaims, TheSlimClaimReadsAsTheFullOneWhatCannotBePlannedIncluded) {
  for (const json& c :
       {claim("all", json::array({exactly("npu.ascend.huawei.com", nullptr, "All")})),
        claim("f",
              json::array({{{"name", "npus"},
                            {"firstAvailable", json::array({{{"name", "eight"},
                                                             {"deviceClassName", "npu.ascend.huawei.com"},
                                                             {"count", 8}}})}}})),
        claim("bad", json::array({exactly("npu.ascend.huawei.com", "4")}))}) {
    auto a = read_claim(c);
    auto b = read_claim(slim_claim(c));
    ASSERT_EQ(a.ok(), b.ok()) << c.dump();
    if (a.ok()) {
      EXPECT_EQ(a->unplannable, b->unplannable);
      EXPECT_EQ(a->chips, b->chips);
    }
  }
}

TEST(DraClaims, TheSlimClaimReadsAsTheFullOne) {
  json c =
      allocated(claim("c", json::array({exactly("npu.ascend.huawei.com", 2)})), "node-1", {"npu-2", "npu-3"});
  c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] =
      json::array({{{"cel", {{"expression", std::string(2000, ' ') + "true"}}}}});
  json slim = slim_claim(c);
  EXPECT_FALSE(slim["metadata"].contains("managedFields"));
  EXPECT_FALSE(slim["spec"]["devices"]["requests"][0]["exactly"].contains("selectors")) << slim.dump();
  auto a = read_claim(c);
  auto b = read_claim(slim);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->key(), a->key());
  EXPECT_EQ(b->uid, a->uid);
  EXPECT_EQ(b->chips, 2);
  EXPECT_TRUE(b->allocated);
  EXPECT_EQ(b->node, "node-1");
  EXPECT_EQ(b->phys, (std::vector<int>{2, 3}));
}

// read_pod's part (pod.h PodInfo::claims): the claim of each spec.resourceClaims entry, by name or from the
// status for a template; malformed or oversized lists are refused naming the field.
TEST(DraClaims, APodsClaimsAreReadFromItsSpecAndStatusWithinLimits) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "train"}}},
              {"spec",
               {{"resourceClaims", json::array({{{"name", "a"}, {"resourceClaimName", "shared"}},
                                                {{"name", "b"}, {"resourceClaimTemplateName", "t"}},
                                                {{"name", "c"}, {"resourceClaimTemplateName", "t"}}})}}},
              {"status",
               {{"resourceClaimStatuses",
                 json::array({{{"name", "b"}, {"resourceClaimName", "p-b-1"}}, {{"name", "c"}}})}}}};
  auto p = read_pod(pod);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->claims, (std::vector<std::string>{"shared", "p-b-1"})) << "c needs no claim (none named)";
  auto refused = [&](json bad, const std::string& says) {
    auto r = read_pod(bad);
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.error().message().find(says), std::string::npos) << r.error().message();
  };
  json x = pod;
  x["spec"]["resourceClaims"] = "a";
  refused(x, "spec.resourceClaims: not an array");
  x = pod;
  x["spec"]["resourceClaims"][1] = 7;
  refused(x, "spec.resourceClaims[1]: not an object");
  x = pod;
  x["spec"]["resourceClaims"][0]["resourceClaimName"] = "Not_A_Name";
  refused(x, "spec.resourceClaims[0] claim");
  x = pod;
  x["status"]["resourceClaimStatuses"] = json::object();
  refused(x, "status.resourceClaimStatuses: not an array");
  x = pod;
  x["status"]["resourceClaimStatuses"][0] = "b";
  refused(x, "status.resourceClaimStatuses[0]: not an object");
  x = pod;
  json many = json::array();
  for (int i = 0; i < 129; ++i)
    many.push_back({{"name", "e" + std::to_string(i)}, {"resourceClaimName", "c"}});
  x["spec"]["resourceClaims"] = many;
  refused(x, "spec.resourceClaims: more than 128 entries");
  x = pod;
  x["status"]["resourceClaimStatuses"] = many;
  refused(x, "status.resourceClaimStatuses: more than 128 entries");
}

PodInfo job_pod() {
  PodInfo p;
  p.ns = "train";
  p.name = "llm-0";
  p.job = JobRequest{};
  p.job->name = "llm";
  p.job->pods = 2;
  p.index = 0;
  p.claims = {"llm-0-npus-abcde"};
  return p;
}

TEST(DraClaims, AJobPodWithoutAResourceAsksWhatItsClaimsAsk) {
  ClaimInfo c;
  c.ns = "train";
  c.name = "llm-0-npus-abcde";
  c.chips = 8;
  PodInfo p = job_pod();
  apply_claims(p, {&c});
  EXPECT_FALSE(chips_from_claims(p)) << "taken: it now asks for its resource";
  EXPECT_EQ(p.resource, kResource910);
  EXPECT_EQ(p.chips, 8);
  EXPECT_TRUE(p.job_error.empty()) << p.job_error;

  // Two claims add up.
  ClaimInfo d = c;
  d.name = "extra";
  d.chips = 2;
  p = job_pod();
  p.claims.push_back("extra");
  apply_claims(p, {&c, &d});
  EXPECT_EQ(p.chips, 10);

  // More chips than read_pod lets a resource ask (4096): refused, saying how many.
  ClaimInfo huge = c;
  huge.chips = 4090;
  p = job_pod();
  p.claims.push_back("extra");
  apply_claims(p, {&c, &huge});
  EXPECT_TRUE(p.resource.empty());
  EXPECT_NE(p.job_error.find("ask for 4098 chips"), std::string::npos) << p.job_error;
}

TEST(DraClaims, AnUnknownOrUnplannableClaimRefusesTheJobPodWithTheReason) {
  PodInfo p = job_pod();
  apply_claims(p, {nullptr});
  EXPECT_TRUE(p.resource.empty());
  EXPECT_NE(p.job_error.find("train/llm-0-npus-abcde is not in the scheduler's cache"), std::string::npos)
      << p.job_error;
  ClaimInfo c;
  c.ns = "train";
  c.name = "llm-0-npus-abcde";
  c.unplannable = "request x asks for vNPUs";
  p = job_pod();
  apply_claims(p, {&c});
  EXPECT_NE(p.job_error.find("asks for vNPUs"), std::string::npos) << p.job_error;
}

TEST(DraClaims, PodsThatAreNotDraJobPodsAreLeftAsTheyAre) {
  ClaimInfo c;
  c.ns = "train";
  c.name = "llm-0-npus-abcde";
  c.chips = 8;
  PodInfo plain = job_pod();
  plain.job.reset();  // a pod without a job: kube-scheduler's alone
  EXPECT_FALSE(chips_from_claims(plain));
  apply_claims(plain, {&c});
  EXPECT_EQ(plain.chips, 0);
  EXPECT_TRUE(plain.resource.empty());
  PodInfo device_plugin = job_pod();
  device_plugin.resource = kResource910;  // asks the device plugin: its resource wins
  device_plugin.chips = 4;
  apply_claims(device_plugin, {&c});
  EXPECT_EQ(device_plugin.resource, kResource910);
  EXPECT_EQ(device_plugin.chips, 4);
  ClaimInfo none = c;  // claims that ask nothing of our chips
  none.chips = 0;
  PodInfo other = job_pod();
  apply_claims(other, {&none});
  EXPECT_EQ(other.chips, 0);
  EXPECT_TRUE(other.resource.empty());
  EXPECT_TRUE(other.job_error.empty());
}

}  // namespace
}  // namespace ascend::scheduler
