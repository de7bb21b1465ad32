// The DRA ResourceSlices of a node (dra_slices.h). Expected values are written by hand from the real Atlas
// 800T A2 capture the emulator's profile follows (tests/fixtures/npu-smi/a2-info.txt: names, bus ids, HBM;
// a2-topo.txt: the CPU affinity and so the NUMA node of each chip) and from the resource.k8s.io/v1 API
// (ResourceSliceMaxDevices = 128; attribute values as {"int"|"bool"|"string": v}). The vNPU cases
// (--dra-vnpu) take the templates and capacities of the vNPU template reference (hicann's
// dcmi_inner_info_get.c table, as the emulator's profiles carry it: 910B3 "bin1" vir10_3c_32g and
// vir05_1c_16g; the 910B4 capture SAMPLE K, tests/fixtures/npu-smi/800i-a2-910b4.yaml and k-template-info.txt
// / k-info-vnpu-before.txt) and the 1.34 limits of pkg/apis/resource (32 shared counters a slice, a device
// consumes counter sets of its own slice).
#include "ascend/plugin/dra_slices.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "ascend/common/yaml_json.h"
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

// Every device of every slice, by name.
std::map<std::string, json> devices_by_name(const std::vector<json>& slices) {
  std::map<std::string, json> out;
  for (const auto& s : slices)
    for (const auto& d : s["spec"]["devices"]) out[d["name"].get<std::string>()] = d;
  return out;
}

// The 1.34 validation rules a slice with counters must keep (pkg/apis/resource/validation, by hand).
void expect_valid_134(const std::vector<json>& slices) {
  for (const auto& s : slices) {
    SCOPED_TRACE(s["metadata"]["name"].dump());
    std::set<std::string> sets;
    std::size_t shared = 0;
    for (const auto& cs : s["spec"].value("sharedCounters", json::array())) {
      EXPECT_TRUE(sets.insert(cs["name"].get<std::string>()).second);
      shared += cs["counters"].size();
    }
    EXPECT_LE(shared, 32u);
    EXPECT_LE(s["spec"]["devices"].size(), 128u);
    std::size_t consumed = 0;
    for (const auto& d : s["spec"]["devices"]) {
      EXPECT_LE(d["name"].get<std::string>().size(), 63u);
      for (const auto& c : d.value("consumesCounters", json::array())) {
        EXPECT_EQ(sets.count(c["counterSet"].get<std::string>()), 1u) << d["name"] << ": another slice's set";
        consumed += c["counters"].size();
      }
    }
    EXPECT_LE(consumed, 1024u);
  }
}

TEST(DraVnpuSlices, A910B3ChipHasTwoCountersAWholeChipDeviceAndSixVnpuDevices) {
  // 910B3 (bin1): capacity 20 AICores, 64 GB, AICPU 6, VPC 9, VENC 0, VDEC 2, JPEGD 24, JPEGE 4;
  // vir10_3c_32g = 10 AIC, 32 GB, 3 AICPU, 4 VPC, 1 VDEC, 12 JPEGD, 2 JPEGE: 2 fit (every resource halves);
  // vir05_1c_16g = 5 AIC, 16 GB, 1 AICPU, 2 VPC, 0 VDEC, 6 JPEGD, 1 JPEGE: 4 fit (AICore, memory, JPEGD,
  // JPEGE). No template takes a larger share of AICPU (3/6, 1/6), VPC (4/9, 2/9), VDEC (1/2, 0), JPEGD
  // (12/24, 6/24) or JPEGE (2/4, 1/4) than of the AICores (10/20, 5/20): AICores and memory say it all.
  const auto host = a2();
  EXPECT_EQ(max_instances(*host.find_template("vir10_3c_32g"), host.vnpu_capacity), 2);
  EXPECT_EQ(max_instances(*host.find_template("vir05_1c_16g"), host.vnpu_capacity), 4);
  EXPECT_EQ(chip_counters(host), (std::vector<Counter>{{"aicore", "20"}, {"memory", "64Gi"}}));
  const auto slices = resource_slices(host, {}, kNode, 2, SliceVnpus::kTemplates);
  expect_valid_134(slices);
  ASSERT_EQ(slices.size(), 1u) << "8 chips x 2 counters = 16 <= 32; 8 x (1 + 2 + 4) = 56 devices <= 128";
  const json& spec = slices[0]["spec"];
  ASSERT_EQ(spec["sharedCounters"].size(), 8u);
  EXPECT_EQ(spec["sharedCounters"][3], json::parse(R"({"name":"npu-3","counters":{
      "aicore":{"value":"20"},"memory":{"value":"64Gi"}}})"));
  EXPECT_EQ(spec["devices"].size(), 56u);
  const auto by_name = devices_by_name(slices);
  EXPECT_EQ(by_name.at("npu-3")["consumesCounters"], json::parse(R"([{"counterSet":"npu-3","counters":{
      "aicore":{"value":"20"},"memory":{"value":"64Gi"}}}])"));
  for (const char* n :
       {"npu-3-vir10-3c-32g-0", "npu-3-vir10-3c-32g-1", "npu-3-vir05-1c-16g-0", "npu-3-vir05-1c-16g-3"})
    EXPECT_EQ(by_name.count(n), 1u) << n;
  EXPECT_EQ(by_name.count("npu-3-vir10-3c-32g-2"), 0u);
  EXPECT_EQ(by_name.count("npu-3-vir05-1c-16g-4"), 0u);
  const json& v = by_name.at("npu-3-vir05-1c-16g-3");
  EXPECT_EQ(v["consumesCounters"], json::parse(R"([{"counterSet":"npu-3","counters":{
      "aicore":{"value":"5"},"memory":{"value":"16Gi"}}}])"));
  EXPECT_EQ(v["capacity"], json::parse(R"({"aicore":{"value":"5"},"memory":{"value":"16Gi"}})"));
  const json& a = v["attributes"];
  EXPECT_EQ(a["vnpuTemplate"], json({{"string", "vir05_1c_16g"}}));
  EXPECT_EQ(a["phyId"], json({{"int", 3}})) << "the chip it is carved from";
  EXPECT_EQ(a["model"], json({{"string", "910B3"}}));
  EXPECT_EQ(a["hccsDomain"], json({{"int", 0}}));
  EXPECT_EQ(a["pcieBus"], json({{"string", "0000:82:00.0"}}));
  EXPECT_EQ(a["aicoreCount"], json({{"int", 5}}));
  EXPECT_EQ(a["hbmMiB"], json({{"int", 16384}}));
  EXPECT_EQ(a["healthy"], json({{"bool", true}}));
  EXPECT_LE(a.size() + v["capacity"].size(), 32u);
  EXPECT_FALSE(by_name.at("npu-3")["attributes"].contains("vnpuTemplate"))
      << "the classes tell them apart by it";
}

TEST(DraVnpuSlices, A910B4NeedsCountersForAicpuAndTheMediaUnitsAndSplitsFourChipsASlice) {
  // SAMPLE K (910B4, 32 GB): capacity 20 AIC, 32 GB, AICPU 6, VPC 9, VENC 0, VDEC 2, JPEGD 24, JPEGE 4,
  // PNGD NA. vir10_4c_16g_m takes half the AICores and memory but 4/6 AICPU and all VPC, VDEC, JPEGD,
  // JPEGE: one fits, and it cannot go with a vir10_3c_16g (AICPU 7 > 6, VPC 13 > 9) although AICores and
  // memory would allow it. So AICPU, VPC, VDEC, JPEGD and JPEGE get counters too (VENC: no template uses
  // it; PNGD: not limited): 7 a chip, 4 chips (28) a slice.
  auto loaded =
      npu::load_profile(std::string(ASCEND_SOURCE_DIR) + "/tests/fixtures/npu-smi/800i-a2-910b4.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  const npu::DeviceSnapshot& host = *loaded;
  EXPECT_EQ(max_instances(*host.find_template("vir10_3c_16g"), host.vnpu_capacity), 2);
  EXPECT_EQ(max_instances(*host.find_template("vir10_4c_16g_m"), host.vnpu_capacity), 1);
  EXPECT_EQ(max_instances(*host.find_template("vir10_3c_16g_nm"), host.vnpu_capacity), 2);
  EXPECT_EQ(max_instances(*host.find_template("vir05_1c_8g"), host.vnpu_capacity), 4);
  EXPECT_EQ(chip_counters(host), (std::vector<Counter>{{"aicore", "20"},
                                                       {"memory", "32Gi"},
                                                       {"aicpu", "6"},
                                                       {"vpc", "9"},
                                                       {"vdec", "2"},
                                                       {"jpegd", "24"},
                                                       {"jpege", "4"}}));
  const auto slices = resource_slices(host, {6}, kNode, 5, SliceVnpus::kTemplates);
  expect_valid_134(slices);
  ASSERT_EQ(slices.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(slices[i]["spec"]["sharedCounters"].size(), 4u);
    EXPECT_EQ(slices[i]["spec"]["devices"].size(), 40u) << "4 x (1 + 2 + 1 + 2 + 4)";
    EXPECT_EQ(slices[i]["spec"]["pool"]["resourceSliceCount"], 2);
    EXPECT_EQ(slices[i]["spec"]["pool"]["generation"], 5);
  }
  EXPECT_EQ(slices[1]["spec"]["sharedCounters"][0]["name"], "npu-4");
  const auto by_name = devices_by_name(slices);
  EXPECT_EQ(by_name.at("npu-5-vir10-4c-16g-m-0")["consumesCounters"], json::parse(R"([{"counterSet":"npu-5",
      "counters":{"aicore":{"value":"10"},"memory":{"value":"16Gi"},"aicpu":{"value":"4"},"vpc":{"value":"9"},
      "vdec":{"value":"2"},"jpegd":{"value":"24"},"jpege":{"value":"4"}}}])"));
  EXPECT_EQ(by_name.at("npu-5-vir10-3c-16g-nm-1")["consumesCounters"], json::parse(R"([{"counterSet":"npu-5",
      "counters":{"aicore":{"value":"10"},"memory":{"value":"16Gi"},"aicpu":{"value":"3"}}}])"))
      << "what a template does not use it does not consume";
  for (const auto& [name, d] : by_name)
    EXPECT_EQ(d["attributes"]["healthy"]["bool"], name.rfind("npu-6", 0) != 0)
        << name << ": chip 6 is unusable";
}

TEST(DraVnpuSlices, TheCountersOnlyProbeHasNoVnpuDevicesAndNoneIsAsBefore) {
  const auto host = a2();
  const auto probe = resource_slices(host, {}, kNode, 1, SliceVnpus::kCountersOnly);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0]["spec"]["devices"].size(), 8u);
  EXPECT_EQ(probe[0]["spec"]["sharedCounters"].size(), 8u);
  EXPECT_TRUE(has_counters(probe[0]));
  const auto plain = resource_slices(host, {}, kNode, 1);
  EXPECT_FALSE(plain[0]["spec"].contains("sharedCounters"));
  EXPECT_FALSE(plain[0]["spec"]["devices"][0].contains("consumesCounters"));
  EXPECT_FALSE(has_counters(plain[0]));
  // The API server with the gate off: the same slice without the fields.
  json dropped = probe[0];
  dropped["spec"].erase("sharedCounters");
  for (auto& d : dropped["spec"]["devices"]) d.erase("consumesCounters");
  EXPECT_FALSE(counters_kept(probe[0], dropped));
  EXPECT_TRUE(counters_kept(probe[0], probe[0]));
  EXPECT_TRUE(counters_kept(plain[0], plain[0]));
  EXPECT_TRUE(slices_match({dropped}, plain)) << "what the gate-off server keeps is the chips-only pool";
  EXPECT_FALSE(slices_match({dropped}, probe));
}

TEST(DraVnpuSlices, VnpuDeviceNamesRoundTripAndAnythingElseIsRefused) {
  const auto host = a2();
  EXPECT_EQ(vnpu_device_name(3, "vir05_1c_16g", 2), "npu-3-vir05-1c-16g-2");
  EXPECT_EQ(*vnpu_of_device(host, "npu-3-vir05-1c-16g-2"), (VnpuDeviceRef{3, "vir05_1c_16g", 2}));
  EXPECT_EQ(*vnpu_of_device(host, "npu-12-vir10-3c-32g-1"), (VnpuDeviceRef{12, "vir10_3c_32g", 1}));
  EXPECT_TRUE(is_vnpu_device_name("npu-3-vir05-1c-16g-2"));
  EXPECT_FALSE(is_vnpu_device_name("npu-3"));
  for (const char* bad : {"npu-3", "npu-3-vir05-1c-16g-4", "npu-3-vir05-1c-16g-", "npu-3-vir05-1c-16g-01",
                          "npu-3-vir05_1c_16g-0", "npu-3-vir99-0", "npu-03-vir05-1c-16g-0",
                          "npu-x-vir05-1c-16g-0", "npu-3-vir05-1c-16g--1", ""}) {
    auto r = vnpu_of_device(host, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), EINVAL);
  }
}

// deploy/kubernetes: one DeviceClass per template a chip of any family offers (the emulator's table, which
// follows the reference), named as the slices name the template (DNS: '_' as '-'), selecting that template's
// healthy devices; the chip class selects no vNPU.
TEST(DraVnpuSlices, EveryTemplateHasItsDeviceClassAndTheChipClassSelectsNoVnpu) {
  std::map<std::string, std::string> classes;  // name -> CEL expression
  for (const auto& d : YAML::LoadAllFromFile(std::string(ASCEND_SOURCE_DIR) +
                                             "/deploy/kubernetes/dra-vnpu-deviceclasses.yaml")) {
    const json doc = ascend::yaml_to_json(d);
    ASSERT_EQ(doc["apiVersion"], "resource.k8s.io/v1");
    ASSERT_EQ(doc["kind"], "DeviceClass");
    ASSERT_EQ(doc["spec"]["selectors"].size(), 1u);
    EXPECT_TRUE(
        classes.emplace(doc["metadata"]["name"], doc["spec"]["selectors"][0]["cel"]["expression"]).second);
  }
  std::set<std::string> templates;
  for (const auto& [family, mem] :
       {std::pair{npu::Family::k910, 32768}, std::pair{npu::Family::k910B, 65536},
        std::pair{npu::Family::k910B, 32768}, std::pair{npu::Family::k910_93, 65536},
        std::pair{npu::Family::k310P, 24576}})
    for (const auto& t : npu::templates_for(family, mem)) templates.insert(t.name);
  EXPECT_EQ(templates.size(), 17u)
      << "4 + 7 + 2 + 4 + 2 names, vir02 and vir04 shared by the 910 and the 310P";
  EXPECT_EQ(classes.size(), templates.size());
  for (const auto& t : templates) {
    const std::string device = vnpu_device_name(0, t, 0);  // "npu-0-<dashed>-0"
    const std::string name = device.substr(6, device.size() - 8) + ".npu.ascend.huawei.com";
    ASSERT_EQ(classes.count(name), 1u) << name;
    const std::string& cel = classes[name];
    EXPECT_NE(cel.find("device.driver == \"npu.ascend.huawei.com\""), std::string::npos) << cel;
    EXPECT_NE(cel.find("\"vnpuTemplate\" in device.attributes[\"npu.ascend.huawei.com\"]"),
              std::string::npos);
    EXPECT_NE(cel.find(".vnpuTemplate == \"" + t + "\""), std::string::npos) << cel;
    EXPECT_NE(cel.find(".healthy == true"), std::string::npos) << cel;
  }
  const auto chips = ascend::yaml_to_json(
      YAML::LoadFile(std::string(ASCEND_SOURCE_DIR) + "/deploy/kubernetes/dra-deviceclass.yaml"));
  EXPECT_NE(chips["spec"]["selectors"][0]["cel"]["expression"].get<std::string>().find(
                "!(\"vnpuTemplate\" in device.attributes[\"npu.ascend.huawei.com\"])"),
            std::string::npos);
}

}  // namespace
}  // namespace ascend::plugin::dra
