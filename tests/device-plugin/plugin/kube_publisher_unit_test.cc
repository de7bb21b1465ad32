// The publisher's decisions, pure: what the device ConfigMap says for a snapshot (written out by hand from
// MindCluster's format), MindCluster's servertype, when the ConfigMap is due, the patches it sends.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ascend/plugin/kube_publisher.h"
#include "ascend/plugin/options.h"

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using deviceinfo::ChipFault;
using deviceinfo::NodeDevices;
using nlohmann::json;

npu::Chip chip(int phy, std::vector<npu::Fault> faults = {}) {
  npu::Chip c;
  c.phy_id = c.logic_id = c.card_id = phy;
  c.name = "910B3";
  c.aicore_count = 20;
  c.faults = std::move(faults);
  return c;
}

npu::DeviceSnapshot host() {
  npu::DeviceSnapshot s;
  s.family = npu::Family::k910B;
  s.driver_version = "24.1.rc1.b030";
  s.chips = {chip(0), chip(1, {{0x80E01801, npu::Health::kCritical}}),
             chip(2, {{0x80000001, npu::Health::kWarning}}),
             chip(3, {{0x84000001, npu::Health::kAlarm}, {0x8C03A000, npu::Health::kCritical}})};
  return s;
}

TEST(KubePublisher, NodeDevicesFollowTheChipsHealth) {
  NodeDevices want;
  want.node = "worker-1";
  want.resource = "huawei.com/Ascend910";
  want.healthy = {0, 2};    // a Warning is sub-health: still schedulable
  want.unhealthy = {1, 3};  // Alarm and Critical
  want.faults = {{1, {"80E01801"}, "SeparateNPU", false},
                 {2, {"80000001"}, "NotHandleFault", false},
                 {3, {"84000001", "8C03A000"}, "SeparateNPU", false}};
  want.update_time = 1764662400;
  EXPECT_EQ(node_devices(host(), "huawei.com/Ascend910", "worker-1", 1764662400), want);
}

TEST(KubePublisher, ServerTypeIsMindClustersCardTypeAndAICores) {
  auto s = host();
  EXPECT_EQ(server_type(s), "Ascend910B-20");
  s.family = npu::Family::k910_93;
  s.chips[0].aicore_count = 24;
  EXPECT_EQ(server_type(s), "Ascend910A3-24");
  s.family = npu::Family::k910;
  s.chips[0].aicore_count = 32;
  EXPECT_EQ(server_type(s), "Ascend910-32");
  s.family = npu::Family::k310P;
  s.chips[0].aicore_count = 8;
  EXPECT_EQ(server_type(s), "Ascend310P-8");
  s.chips.clear();
  EXPECT_EQ(server_type(s), "");
}

TEST(KubePublisher, NodeFacts) {
  const auto f = node_facts(host(), "huawei.com/Ascend910");
  EXPECT_EQ(f, (deviceinfo::NodeFacts{"huawei.com/Ascend910", "910B3", 4, "24.1.rc1.b030", "Ascend910B-20"}));
}

TEST(KubePublisher, ConfigMapDueOnChangeOrRefresh) {
  const auto now = node_devices(host(), "huawei.com/Ascend910", "worker-1", 2000);
  auto earlier = node_devices(host(), "huawei.com/Ascend910", "worker-1", 1990);
  EXPECT_TRUE(configmap_due(std::nullopt, now, 0ms, 60s)) << "never written";
  EXPECT_FALSE(configmap_due(earlier, now, 10s, 60s)) << "only the time moved";
  EXPECT_TRUE(configmap_due(earlier, now, 60s, 60s)) << "the refresh is due";
  earlier.unhealthy = {1};
  EXPECT_TRUE(configmap_due(earlier, now, 1s, 60s)) << "a chip's health changed";
}

TEST(KubePublisher, ConfigMapPatchKeepsOthersKeys) {
  const auto cm = deviceinfo::to_configmap(node_devices(host(), "huawei.com/Ascend910", "worker-1", 2000));
  const json want = {
      {"metadata", {{"labels", {{"mx-consumer-cim", "true"}}}}},
      {"data",
       {{"DeviceInfoCfg", cm["data"]["DeviceInfoCfg"]},
        // Issue 23: the plugin writes the isolated chips (read first, so an operator's edit stays).
        {"ManuallySeparateNPU", ""}}}};
  EXPECT_EQ(configmap_patch(cm), want);
}

TEST(KubePublisher, LabelPatchNamesOnlyWhatDiffers) {
  const std::map<std::string, std::string> want = {{"accelerator", "huawei-Ascend910"},
                                                   {"servertype", "Ascend910B-20"}};
  EXPECT_EQ(label_patch(want, json{{"metadata", {{"name", "n"}}}}),
            (json{{"metadata",
                   {{"labels", {{"accelerator", "huawei-Ascend910"}, {"servertype", "Ascend910B-20"}}}}}}));
  const json same = {{"metadata",
                      {{"labels",
                        {{"accelerator", "huawei-Ascend910"},
                         {"servertype", "Ascend910B-20"},
                         {"kubernetes.io/hostname", "n"}}}}}};
  EXPECT_EQ(label_patch(want, same), std::nullopt);
  json differs = same;
  differs["metadata"]["labels"]["servertype"] = "Ascend910-32";
  EXPECT_EQ(label_patch(want, differs),
            (json{{"metadata", {{"labels", {{"servertype", "Ascend910B-20"}}}}}}));
  json not_string = same;
  not_string["metadata"]["labels"]["accelerator"] = 1;
  EXPECT_EQ(label_patch(want, not_string),
            (json{{"metadata", {{"labels", {{"accelerator", "huawei-Ascend910"}}}}}}));
  EXPECT_EQ(label_patch(want, json::array()),
            (json{{"metadata",
                   {{"labels", {{"accelerator", "huawei-Ascend910"}, {"servertype", "Ascend910B-20"}}}}}}));
}

TEST(KubeFlags, ParseAndRefuseContradictions) {
  auto c = parse_options(
      {"--kube-api", "https://10.0.0.1:6443", "--kube-token-file", "/t", "--kube-ca-file", "/ca"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->kube_api, "https://10.0.0.1:6443");
  EXPECT_EQ(c->kube_token_file, "/t");
  EXPECT_EQ(c->kube_ca_file, "/ca");
  EXPECT_TRUE(validate(*c).ok());
  c = parse_options({"--kubeconfig", "/k", "--no-kube"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->no_kube);
  EXPECT_NE(validate(*c).error().message().find("--no-kube"), std::string::npos);
  c = parse_options({"--kube-token-file", "/t"});
  ASSERT_TRUE(c.ok());
  EXPECT_NE(validate(*c).error().message().find("go with --kube-api"), std::string::npos);
  c = parse_options({"--kubeconfig", "/k", "--kube-api", "http://h"});
  ASSERT_TRUE(c.ok());
  EXPECT_NE(validate(*c).error().message().find("not both"), std::string::npos);
}

TEST(KubeFlags, DraVnpuNeedsDraAndAnAbsoluteCdiFolder) {
  auto c = parse_options({"--kubeconfig", "/k", "--dra", "--dra-vnpu"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(c->dra_vnpu);
  EXPECT_EQ(c->dra_cdi_dir, "/var/run/cdi") << "the CDI specification's folder for transient specs";
  EXPECT_TRUE(validate(*c).ok());
  c = parse_options({"--kubeconfig", "/k", "--dra-vnpu"});
  ASSERT_TRUE(c.ok());
  ASSERT_FALSE(validate(*c).ok());
  EXPECT_EQ(validate(*c).error().message(), "--dra-vnpu publishes vNPUs as DRA devices: it needs --dra");
  c = parse_options({"--kubeconfig", "/k", "--dra", "--dra-vnpu", "--dra-cdi-dir", "cdi"});
  ASSERT_TRUE(c.ok());
  ASSERT_FALSE(validate(*c).ok());
  EXPECT_NE(validate(*c).error().message().find("(got 'cdi')"), std::string::npos);
}

}  // namespace
}  // namespace ascend::plugin
