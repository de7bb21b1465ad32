// The device ConfigMap codec against the format MindCluster publishes: a ConfigMap written by hand from the
// API reference (worker-1.json; its CheckCode computed with sha256sum, see the fixtures' README), and
// MindCluster's own documented example (mindcluster-doc-a3.json, CheckCode as printed there). Every refusal
// of from_configmap, and the Node labels.
#include "ascend/deviceinfo/deviceinfo.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace ascend::deviceinfo {
namespace {

const std::string kDir = std::string(ASCEND_FIXTURES) + "/deviceinfo";

nlohmann::json load(const std::string& name) {
  std::ifstream in(kDir + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

// The node of worker-1.json, as the plugin would describe it.
NodeDevices worker1() {
  NodeDevices d;
  d.node = "worker-1";
  d.resource = "huawei.com/Ascend910";
  d.healthy = {0, 1, 2, 3, 5, 6, 7};
  d.unhealthy = {4};
  d.network_unhealthy = {2};
  d.faults = {{2, {"81078603"}, kSeparateNPU, true},
              {4, {"80E18402", "80E18401"}, kSeparateNPU, false},
              {6, {"80C98000"}, kNotHandleFault, false}};
  d.update_time = 1764662400;
  return d;
}

TEST(DeviceInfo, WritesTheConfigMapMindClusterWrites) {
  const auto want = load("worker-1.json");
  const auto got = to_configmap(worker1());
  EXPECT_EQ(got, want) << got.dump(2);
  // Byte for byte, as Go writes it (field order included), not only the same JSON.
  EXPECT_EQ(got["data"]["DeviceInfoCfg"].get<std::string>(),
            want["data"]["DeviceInfoCfg"].get<std::string>());
}

TEST(DeviceInfo, ReadsWhatItWrites) {
  const auto d = worker1();
  auto back = from_configmap(to_configmap(d));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, d);
}

TEST(DeviceInfo, ReadsMindClustersDocumentedExample) {
  auto d = from_configmap(load("mindcluster-doc-a3.json"));
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->node, "localhost.localdomain");
  EXPECT_EQ(d->resource, "huawei.com/Ascend910");
  EXPECT_EQ(d->healthy, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(d->unhealthy, std::vector<int>{4});
  EXPECT_TRUE(d->network_unhealthy.empty());
  ASSERT_EQ(d->faults.size(), 1U);
  // That version wrote no fault_handling: its fault_level stands in.
  EXPECT_EQ(d->faults[0],
            (ChipFault{4, {"A4028801", "A8028801", "80E18402", "80E18401"}, kSeparateNPU, false}));
  EXPECT_EQ(d->update_time, 1700545843);
  EXPECT_EQ(d->super_pod_id, -2);
  EXPECT_EQ(d->server_index, -2);
}

TEST(DeviceInfo, CheckCodeIsTheDocumentedOne) {
  // The DeviceList and UpdateTime of MindCluster's documented example, and the CheckCode printed with them.
  const std::map<std::string, std::string> list = {
      {"huawei.com/Ascend910", "Ascend910-0,Ascend910-1,Ascend910-2,Ascend910-3"},
      {"huawei.com/Ascend910-Fault",
       R"([{"fault_type":"CardUnhealthy","npu_name":"Ascend910-4","large_model_fault_level":"SeparateNPU",)"
       R"("fault_level":"SeparateNPU","fault_code":"A4028801,A8028801,80E18402,80E18401"}])"},
      {"huawei.com/Ascend910-NetworkUnhealthy", ""},
      {"huawei.com/Ascend910-Unhealthy", "Ascend910-4"}};
  EXPECT_EQ(check_code(list, 1700545843), "7e762f58333816da299481825f9a7c251a1a79428beb8d0c488fba9412e0dcf4");
}

TEST(DeviceInfo, CheckCodeEscapesAsGoDoes) {
  // Go's encoding/json writes <, > and & as \u003c, \u003e, \u0026; the hash is over that text:
  // printf '%s' '{"DeviceList":{"a\u003cb\u0026c\u003e":""},"UpdateTime":1}' | sha256sum
  EXPECT_EQ(check_code({{"a<b&c>", ""}}, 1),
            "c3cc293ae3e2149438b97492ac64315d99b7dc83159db155b9b9d51d72ad4dbc");
}

TEST(DeviceInfo, NameAndChipName) {
  EXPECT_EQ(configmap_name("node-a"), "mindx-dl-deviceinfo-node-a");
  EXPECT_EQ(chip_name("huawei.com/Ascend910", 3), "Ascend910-3");
  EXPECT_EQ(chip_name("huawei.com/Ascend310P", 0), "Ascend310P-0");
}

// A ConfigMap of worker-1.json changed by `edit` (on the object, or on DeviceInfoCfg's JSON with its
// CheckCode recomputed so that only the change itself is wrong).
nlohmann::json edited_cm(const std::function<void(nlohmann::json&)>& edit) {
  auto cm = load("worker-1.json");
  edit(cm);
  return cm;
}

nlohmann::json edited_cfg(const std::function<void(nlohmann::json&)>& edit) {
  return edited_cm([&](nlohmann::json& cm) {
    auto cfg = nlohmann::json::parse(cm["data"]["DeviceInfoCfg"].get<std::string>());
    edit(cfg);
    const auto& info = cfg["DeviceInfo"];
    if (cfg.contains("CheckCode") && info.is_object() && info["DeviceList"].is_object() &&
        info["UpdateTime"].is_number_integer()) {
      std::map<std::string, std::string> list;
      bool strings = true;
      for (const auto& [k, v] : info["DeviceList"].items()) {
        strings = strings && v.is_string();
        if (v.is_string()) list[k] = v.get<std::string>();
      }
      if (strings) cfg["CheckCode"] = check_code(list, info["UpdateTime"].get<std::int64_t>());
    }
    cm["data"]["DeviceInfoCfg"] = cfg.dump();
  });
}

struct Refusal {
  const char* what;
  nlohmann::json cm;
  const char* says;  // a part of the one-line message
};

TEST(DeviceInfo, RefusesWhatIsNotTheFormat) {
  const std::vector<Refusal> cases = {
      {"not an object", nlohmann::json::array(), "not a ConfigMap"},
      {"another name", edited_cm([](nlohmann::json& cm) { cm["metadata"]["name"] = "kube-proxy"; }),
       "'kube-proxy' is not mindx-dl-deviceinfo-<node>"},
      {"the bare prefix",
       edited_cm([](nlohmann::json& cm) { cm["metadata"]["name"] = "mindx-dl-deviceinfo-"; }),
       "is not mindx-dl-deviceinfo-<node>"},
      {"another namespace", edited_cm([](nlohmann::json& cm) { cm["metadata"]["namespace"] = "default"; }),
       "namespace 'default', not kube-system"},
      {"no data key", edited_cm([](nlohmann::json& cm) { cm["data"].erase("DeviceInfoCfg"); }),
       "no data key DeviceInfoCfg"},
      {"data not JSON", edited_cm([](nlohmann::json& cm) { cm["data"]["DeviceInfoCfg"] = "{not json"; }),
       "DeviceInfoCfg is not a JSON object"},
      {"over 1 MiB", edited_cm([](nlohmann::json& cm) {
         cm["data"]["DeviceInfoCfg"] = std::string(kMaxDataBytes + 1, ' ');
       }),
       "larger than"},
      {"bad CheckCode", edited_cm([](nlohmann::json& cm) {
         auto s = cm["data"]["DeviceInfoCfg"].get<std::string>();
         s.replace(s.find("Ascend910-5,"), 12, "");  // a chip removed by hand, the code left as it was
         cm["data"]["DeviceInfoCfg"] = s;
       }),
       "CheckCode does not match"},
      {"no CheckCode", edited_cfg([](nlohmann::json& cfg) { cfg.erase("CheckCode"); }),
       "CheckCode is missing"},
      {"no DeviceInfo", edited_cfg([](nlohmann::json& cfg) { cfg.erase("DeviceInfo"); }),
       "DeviceInfo is missing"},
      {"UpdateTime a string",
       edited_cfg([](nlohmann::json& cfg) { cfg["DeviceInfo"]["UpdateTime"] = "now"; }),
       "UpdateTime is not an integer"},
      {"a list value not a string", edited_cfg([](nlohmann::json& cfg) {
         cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Unhealthy"] = 4;
       }),
       "is not a string"},
      {"bad chip name", edited_cfg([](nlohmann::json& cfg) {
         cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Unhealthy"] = "Ascend310-4";
       }),
       "chip name 'Ascend310-4' is not Ascend910-<physical id>"},
      {"chip id not a number", edited_cfg([](nlohmann::json& cfg) {
         cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910"] = "Ascend910-x";
       }),
       "chip name 'Ascend910-x'"},
      {"chip id too large", edited_cfg([](nlohmann::json& cfg) {
         cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910"] = "Ascend910-4096";
       }),
       "chip name 'Ascend910-4096'"},
      {"two resources",
       edited_cfg([](nlohmann::json& cfg) { cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend310P"] = ""; }),
       "names 2 resources"},
      {"fault list not JSON", edited_cfg([](nlohmann::json& cfg) {
         cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"] = "{}";
       }),
       "not a JSON array"},
      {"bad fault chip", edited_cfg([](nlohmann::json& cfg) {
         cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"] =
             R"([{"fault_type":"CardUnhealthy","npu_name":"npu4","fault_code":"80E18402"}])";
       }),
       "chip name 'npu4'"},
      {"bad fault code", edited_cfg([](nlohmann::json& cfg) {
         cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"] =
             R"([{"fault_type":"CardUnhealthy","npu_name":"Ascend910-4","fault_code":"80E1 8402"}])";
       }),
       "fault code '80E1 8402'"},
      {"SuperPodID a string", edited_cfg([](nlohmann::json& cfg) { cfg["SuperPodID"] = "-2"; }),
       "SuperPodID is not"},
  };
  for (const auto& c : cases) {
    auto r = from_configmap(c.cm);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.error().code(), EINVAL) << c.what;
    EXPECT_NE(r.error().message().find(c.says), std::string::npos) << c.what << ": " << r.error().message();
    EXPECT_EQ(r.error().message().find('\n'), std::string::npos) << c.what;
  }
}

TEST(DeviceInfo, SkipsNodeLevelFaultsAndReadsNullFaults) {
  auto r = from_configmap(edited_cfg([](nlohmann::json& cfg) {
    cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"] =
        R"([{"fault_type":"NodeUnhealthy","npu_name":"","fault_code":"heartbeatTimeOut"}])";
  }));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->faults.empty());
  r = from_configmap(edited_cfg(
      [](nlohmann::json& cfg) { cfg["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"] = "null"; }));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->faults.empty());
}

TEST(DeviceInfo, ResourceFromUnhealthyKeyWhenTheAvailableListIsGone) {
  // Newer MindCluster versions phase out the available-chips key (Volcano keeps that list itself).
  auto r = from_configmap(
      edited_cfg([](nlohmann::json& cfg) { cfg["DeviceInfo"]["DeviceList"].erase("huawei.com/Ascend910"); }));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->resource, "huawei.com/Ascend910");
  EXPECT_TRUE(r->healthy.empty());
  EXPECT_EQ(r->unhealthy, std::vector<int>{4});
}

// ---- Node labels ----

TEST(NodeLabels, MindClusterKeysAndValues) {
  NodeFacts f{"huawei.com/Ascend910", "910B3", 8, "24.1.rc2", "Ascend910B-20"};
  const std::map<std::string, std::string> want = {
      {"accelerator", "huawei-Ascend910"},
      {"huawei.com/npu.chip.name", "910B3"},
      {"node.kubernetes.io/npu.chip.name", "910B3"},
      {"huawei.com/npu.server.type", "Ascend910B-20"},
      {"servertype", "Ascend910B-20"},
      {"huawei.com/npu.driver.version", "24.1.rc2"},
      {"huawei.com/driver.version", "24.1.rc2"},
      {"huawei.com/npu.count", "8"},
  };
  EXPECT_EQ(node_labels(f), want);
}

TEST(NodeLabels, EmptyFactsGiveNoLabel) {
  const auto labels = node_labels(NodeFacts{"huawei.com/Ascend310P", "310P3", 4, "", ""});
  EXPECT_EQ(labels.count("huawei.com/npu.driver.version"), 0U);
  EXPECT_EQ(labels.count("servertype"), 0U);
  EXPECT_EQ(labels.at("accelerator"), "huawei-Ascend310P");
}

TEST(NodeLabels, ValuesAreValidLabelValues) {
  struct Case {
    std::string in, want;
  };
  const std::vector<Case> cases = {
      {"24.1.rc2", "24.1.rc2"},
      {"Ascend 910B3", "Ascend-910B3"},
      {"-x-", "x"},
      {"..", ""},
      {"a/b:c", "a-b-c"},
      {std::string(70, 'a'), std::string(63, 'a')},
      {std::string(62, 'a') + "-b", std::string(62, 'a')},  // cut at 63, then the trailing '-' goes
      {"版本1", "1"},
  };
  for (const auto& c : cases) EXPECT_EQ(label_value(c.in), c.want) << c.in;
}

}  // namespace
}  // namespace ascend::deviceinfo
