// The DRA ResourceSlices of a node (dra_slices.h). Expected values are written by hand from the real Atlas
// 800T A2 capture the emulator's profile follows (tests/fixtures/npu-smi/a2-info.txt: names, bus ids, HBM;
// a2-topo.txt: the CPU affinity and so the NUMA node of each chip) and from the resource.k8s.io/v1 API
// (ResourceSliceMaxDevices = 128; attribute values as {"int"|"bool"|"string": v}).
#include "ascend/plugin/dra_slices.h"

#include <gtest/gtest.h>

#include "ascend/npu/profiles.h"

namespace ascend::plugin::dra {
namespace {

using nlohmann::json;

npu::HostState a2() {
  auto p = npu::builtin_profile("atlas800t-a2");
  EXPECT_TRUE(p.ok());
  return *p;
}

const SliceNode kNode{"node-a", "0f0e-uid", "leaf-3", "spine-1"};

TEST(DraSlices, AnAtlas800TA2IsOnePoolOfEightChipsWithTheCapturesFacts) {
  const auto host = a2();
  const auto slices = resource_slices(host, {}, kNode, 1);
  ASSERT_EQ(slices.size(), 1u);
  const json& s = slices[0];
  EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(s["kind"], "ResourceSlice");
  EXPECT_EQ(s["metadata"]["name"], "node-a-npu.ascend.huawei.com-0");
  EXPECT_EQ(s["metadata"]["ownerReferences"],
            json::parse(
                R"([{"apiVersion":"v1","kind":"Node","name":"node-a","uid":"0f0e-uid","controller":true}])"));
  EXPECT_EQ(s["spec"]["driver"], "npu.ascend.huawei.com");
  EXPECT_EQ(s["spec"]["nodeName"], "node-a");
  EXPECT_EQ(s["spec"]["pool"], json::parse(R"({"name":"node-a","generation":1,"resourceSliceCount":1})"));
  const json& devices = s["spec"]["devices"];
  ASSERT_EQ(devices.size(), 8u);
  // a2-info.txt: the Bus-Id column; a2-topo.txt: CPU affinity 144-167 -> NUMA 6, 96-119 -> 4, 0-23 -> 0,
  // 48-71 -> 2 (24 cores a NUMA node).
  const char* bus[] = {"0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0",
                       "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0"};
  const int numa[] = {6, 6, 4, 4, 0, 0, 2, 2};
  for (int i = 0; i < 8; ++i) {
    const json& d = devices[static_cast<std::size_t>(i)];
    SCOPED_TRACE(d.dump());
    EXPECT_EQ(d["name"], "npu-" + std::to_string(i));
    const json& a = d["attributes"];
    EXPECT_EQ(a["model"], json({{"string", "910B3"}}));
    EXPECT_EQ(a["family"], json({{"string", "910B"}}));
    EXPECT_EQ(a["phyId"], json({{"int", i}}));
    EXPECT_EQ(a["pcieBus"], json({{"string", bus[i]}}));
    EXPECT_EQ(a["numaNode"], json({{"int", numa[i]}}));
    EXPECT_EQ(a["hccsDomain"], json({{"int", 0}})) << "one full HCCS mesh of 8";
    EXPECT_EQ(a["aicoreCount"], json({{"int", 20}})) << "a 910B3 has 20 AI cores";
    EXPECT_EQ(a["hbmMiB"], json({{"int", 65536}})) << "HBM-Usage .../65536";
    EXPECT_EQ(a["driverVersion"], json({{"string", "24.1.rc1.b030"}}));
    EXPECT_EQ(a["leaf"], json({{"string", "leaf-3"}}));
    EXPECT_EQ(a["spine"], json({{"string", "spine-1"}}));
    EXPECT_EQ(a["healthy"], json({{"bool", true}}));
    EXPECT_LE(a.size() + d["capacity"].size(), 32u) << "the API's limit of attributes and capacities";
    EXPECT_EQ(d["capacity"], json::parse(R"({"aicore":{"value":"20"},"memory":{"value":"64Gi"}})"));
    for (const auto& [k, v] : a.items()) {
      EXPECT_LE(k.size(), 32u) << k;
      EXPECT_EQ(v.size(), 1u) << k << ": exactly one of int, bool, string, version";
    }
  }
}

TEST(DraSlices, AnUnusableChipStaysPublishedUnhealthy) {
  const auto slices = resource_slices(a2(), {2, 5}, kNode, 7);
  const json& devices = slices[0]["spec"]["devices"];
  ASSERT_EQ(devices.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(devices[static_cast<std::size_t>(i)]["attributes"]["healthy"]["bool"], i != 2 && i != 5) << i;
  }
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 7);
}

TEST(DraSlices, ANodeWithoutTopologyLabelsOrUidPublishesNoLeafSpineOrOwner) {
  const auto slices = resource_slices(a2(), {}, SliceNode{"n", "", "", ""}, 1);
  EXPECT_FALSE(slices[0]["metadata"].contains("ownerReferences"));
  const json& a = slices[0]["spec"]["devices"][0]["attributes"];
  EXPECT_FALSE(a.contains("leaf"));
  EXPECT_FALSE(a.contains("spine"));
}

TEST(DraSlices, MoreThan128ChipsSplitThePoolAndNoChipsIsAnEmptyPool) {
  auto host = a2();
  const auto one = host.chips[0];
  host.chips.clear();
  for (int i = 0; i < 130; ++i) {
    host.chips.push_back(one);
    host.chips.back().phy_id = i;
  }
  const auto slices = resource_slices(host, {}, kNode, 3);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 128u);
  EXPECT_EQ(slices[1]["spec"]["devices"].size(), 2u);
  EXPECT_EQ(slices[1]["metadata"]["name"], "node-a-npu.ascend.huawei.com-1");
  EXPECT_EQ(slices[1]["spec"]["devices"][1]["name"], "npu-129");
  for (const auto& s : slices) EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 2);
  host.chips.clear();
  const auto empty = resource_slices(host, {}, kNode, 1);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_TRUE(empty[0]["spec"]["devices"].empty());
}

TEST(DraSlices, DeviceNamesRoundTripAndAnythingElseIsRefused) {
  EXPECT_EQ(device_name(3), "npu-3");
  EXPECT_EQ(*phy_of_device("npu-3"), 3);
  EXPECT_EQ(*phy_of_device("npu-15"), 15);
  for (const char* bad : {"npu-", "npu-03", "npu-x", "npu--1", "gpu-1", "npu-1 ", "npu-123456", ""}) {
    auto r = phy_of_device(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), EINVAL);
    EXPECT_NE(r.error().message().find("npu.ascend.huawei.com"), std::string::npos) << r.error().message();
  }
}

TEST(DraSlices, WhatTheServerListsMatchesWhenOnlyItsOwnFieldsDiffer) {
  const auto want = resource_slices(a2(), {}, kNode, 4);
  auto have = want;
  have[0]["metadata"]["resourceVersion"] = "812";
  have[0]["metadata"]["uid"] = "abc";
  have[0]["spec"]["pool"]["generation"] = 3;  // another generation, the same devices
  EXPECT_TRUE(slices_match(have, want));
  auto sick = resource_slices(a2(), {1}, kNode, 4);
  EXPECT_FALSE(slices_match(have, sick));
  EXPECT_FALSE(slices_match({}, want));
  auto relabelled = resource_slices(a2(), {}, SliceNode{"node-a", "0f0e-uid", "leaf-4", "spine-1"}, 4);
  EXPECT_FALSE(slices_match(have, relabelled));
}

TEST(DraSlices, TheNodesLabelsGiveLeafAndSpine) {
  const json node = json::parse(R"({"metadata":{"name":"n1","uid":"u1","labels":{
      "topology.ascend.huawei.com/leaf":"L2","topology.ascend.huawei.com/spine":"S0","x":"y"}}})");
  EXPECT_EQ(slice_node(node), (SliceNode{"n1", "u1", "L2", "S0"}));
  EXPECT_EQ(
      slice_node(json::parse(R"({"metadata":{"name":"n2","labels":{"topology.ascend.huawei.com/leaf":7}}})")),
      (SliceNode{"n2", "", "", ""}))
      << "a label that is not a string is not a leaf";
  EXPECT_EQ(slice_node(json()), SliceNode{});
}

}  // namespace
}  // namespace ascend::plugin::dra
