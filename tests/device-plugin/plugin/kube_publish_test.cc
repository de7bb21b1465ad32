// The publisher against the Kubernetes API server stand-in (tests/support/fake_apiserver.h) on an emulated
// host: the device ConfigMap in MindCluster's format (the DeviceList written out by hand here), a chip fault
// set through the emulator in the ConfigMap within seconds, the Node labelled once (a pass with nothing new
// sends no PATCH), a label removed by hand restored, an existing ConfigMap patched with others' keys kept,
// and an API server that refuses for a while.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "ascend/common/kube_client.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/daemon.h"
#include "ascend/plugin/kube_publisher.h"
#include "ascend/plugin/plugin.h"
#include "eventually.h"
#include "fake_apiserver.h"
#include "log_capture.h"
#include "plugin_on_api.h"
#include "test_dir.h"
#include "test_query.h"

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using api_test::wait_until;
using ascend::testing::kEventually;
using nlohmann::json;
using testing::TempDir;

constexpr const char* kNode = "worker-1";
constexpr const char* kNodePath = "/api/v1/nodes/worker-1";
constexpr const char* kCmPath = "/api/v1/namespaces/kube-system/configmaps/mindx-dl-deviceinfo-worker-1";

// The labels an Atlas 800T A2 (8 x 910B3, 20 AI cores, driver 24.1.rc1.b030) gets, with MindCluster's keys.
const std::map<std::string, std::string> kLabels = {
    {"accelerator", "huawei-Ascend910"},
    {"huawei.com/npu.chip.name", "910B3"},
    {"node.kubernetes.io/npu.chip.name", "910B3"},
    {"huawei.com/npu.server.type", "Ascend910B-20"},
    {"servertype", "Ascend910B-20"},
    {"huawei.com/npu.driver.version", "24.1.rc1.b030"},
    {"huawei.com/driver.version", "24.1.rc1.b030"},
    {"huawei.com/npu.count", "8"},
};

using ascend::testing::LogCapture;

class KubePublish : public api_test::PluginOnApi {
 protected:
  void SetUp() override { start_plugin(); }

  void add_node() {
    api.create("/api/v1/nodes",
               {{"apiVersion", "v1"},
                {"kind", "Node"},
                {"metadata", {{"name", kNode}, {"labels", {{"kubernetes.io/hostname", kNode}}}}}});
  }

  std::unique_ptr<KubePublisher> start(std::chrono::milliseconds refresh = 60s) {
    KubePublisherOptions o;
    o.refresh_every = refresh;
    o.backoff_first = 50ms;
    o.backoff_max = 200ms;
    return std::make_unique<KubePublisher>(*plugin, *client, kNode, o);
  }

  json device_info() {
    const auto cm = api.get(kCmPath);
    if (!cm.is_object()) return nullptr;
    return json::parse(cm["data"]["DeviceInfoCfg"].get<std::string>())["DeviceInfo"];
  }

  bool labelled() {
    const auto node = api.get(kNodePath);
    for (const auto& [k, v] : kLabels)
      if (node["metadata"]["labels"].value(k, "") != v) return false;
    return true;
  }

  int count(const std::string& method, const std::string& path) {
    int n = 0;
    for (const auto& r : api.requests()) n += (r.method == method && r.path == path) ? 1 : 0;
    return n;
  }
};

// The DeviceList of this host with `unhealthy` out of service, as MindCluster writes it.
json device_list(const std::string& unhealthy, const std::string& faults) {
  std::string healthy;
  for (int i = 0; i < 8; ++i) {
    const std::string name = "Ascend910-" + std::to_string(i);
    if (name != unhealthy) healthy += (healthy.empty() ? "" : ",") + name;
  }
  return {{"huawei.com/Ascend910", healthy},
          {"huawei.com/Ascend910-Fault", faults},
          {"huawei.com/Ascend910-NetworkUnhealthy", ""},
          {"huawei.com/Ascend910-Recovering", ""},
          {"huawei.com/Ascend910-Unhealthy", unhealthy}};
}

TEST_F(KubePublish, WritesTheConfigMapAndLabelsTheNodeOnce) {
  add_node();
  const auto t0 =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  auto pub = start();
  ASSERT_TRUE(wait_until([&] { return api.get(kCmPath).is_object() && labelled(); }, 5s));

  const auto cm = api.get(kCmPath);
  EXPECT_EQ(cm["metadata"]["labels"], (json{{"mx-consumer-cim", "true"}}));
  EXPECT_EQ(cm["data"]["ManuallySeparateNPU"], "");
  const auto info = device_info();
  EXPECT_EQ(info["DeviceList"], device_list("", "[]"));
  EXPECT_GE(info["UpdateTime"].get<std::int64_t>(), t0);
  const auto read = deviceinfo::from_configmap(cm);  // its CheckCode holds
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->super_pod_id, -2);
  EXPECT_EQ(count("PATCH", kNodePath), 1);
  EXPECT_EQ(api.get(kNodePath)["metadata"]["labels"]["kubernetes.io/hostname"], kNode)
      << "others' labels stay";
}

TEST_F(KubePublish, ChipFaultIsInTheConfigMapWithinSecondsAndTheLabelsAreLeftAlone) {
  add_node();
  auto pub = start();
  ASSERT_TRUE(wait_until([&] { return api.get(kCmPath).is_object() && labelled(); }, 5s));
  api.clear_requests();

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(emu.set_fault(3, 0x80E18402, npu::Health::kCritical).ok());
  const auto faults = json::array({{{"fault_type", "CardUnhealthy"},
                                    {"npu_name", "Ascend910-3"},
                                    {"large_model_fault_level", "SeparateNPU"},
                                    {"fault_level", "SeparateNPU"},
                                    {"fault_handling", "SeparateNPU"},
                                    {"fault_code", "80E18402"}}});
  ASSERT_TRUE(wait_until(
      [&] { return device_info()["DeviceList"]["huawei.com/Ascend910-Unhealthy"] == "Ascend910-3"; },
      kEventually))
      << device_info().dump();
  std::printf("fault -> ConfigMap in %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
                      .count()));
  const auto list = device_info()["DeviceList"];
  EXPECT_EQ(json::parse(list["huawei.com/Ascend910-Fault"].get<std::string>()), faults);
  EXPECT_EQ(list["huawei.com/Ascend910"], device_list("Ascend910-3", "")["huawei.com/Ascend910"]);
  EXPECT_TRUE(deviceinfo::from_configmap(api.get(kCmPath)).ok());

  // That pass reads the Node after writing the ConfigMap, finds its labels right, and sends no PATCH (one
  // would follow the GET within milliseconds).
  ASSERT_TRUE(wait_until([&] { return count("GET", kNodePath) >= 1; }, kEventually));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(count("PATCH", kNodePath), 0);
  EXPECT_GE(count("PATCH", kCmPath), 1);
  EXPECT_EQ(pub->stats().label_patches, 1);
}

TEST_F(KubePublish, RefreshRewritesUpdateTimeAndRestoresARemovedLabel) {
  add_node();
  auto pub = start(300ms);
  ASSERT_TRUE(wait_until([&] { return api.get(kCmPath).is_object() && labelled(); }, 5s));
  const auto first = device_info()["UpdateTime"].get<std::int64_t>();
  api.patch(kNodePath, {{"metadata", {{"labels", {{"servertype", nullptr}}}}}});
  ASSERT_TRUE(wait_until([&] { return labelled(); }, kEventually)) << "servertype not restored";
  ASSERT_TRUE(
      wait_until([&] { return device_info()["UpdateTime"].get<std::int64_t>() > first; }, kEventually));
  // Counted once the PATCH has returned, which may be after the test sees the label.
  EXPECT_TRUE(wait_until([&] { return pub->stats().label_patches == 2; }, kEventually))
      << pub->stats().label_patches;
}

TEST_F(KubePublish, RecreatesADeletedConfigMap) {
  add_node();
  auto pub = start(300ms);
  ASSERT_TRUE(wait_until([&] { return api.get(kCmPath).is_object(); }, 5s));
  ASSERT_TRUE(api.remove(kCmPath));
  ASSERT_TRUE(wait_until([&] { return deviceinfo::from_configmap(api.get(kCmPath)).ok(); }, kEventually));
}

TEST_F(KubePublish, PatchesAnExistingConfigMapKeepingOthersKeys) {
  add_node();
  api.create("/api/v1/namespaces/kube-system/configmaps",
             {{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", "mindx-dl-deviceinfo-worker-1"}, {"namespace", "kube-system"}}},
              {"data", {{"DeviceInfoCfg", "{}"}, {"ManuallySeparateNPU", "Ascend910-7"}}}});
  auto pub = start();
  ASSERT_TRUE(wait_until([&] { return deviceinfo::from_configmap(api.get(kCmPath)).ok(); }, 5s));
  const auto cm = api.get(kCmPath);
  EXPECT_EQ(cm["data"]["ManuallySeparateNPU"], "Ascend910-7");
  EXPECT_EQ(cm["metadata"]["labels"], (json{{"mx-consumer-cim", "true"}}));
  // Issue 23: a chip named in ManuallySeparateNPU is isolated, so Unhealthy.
  EXPECT_EQ(device_info()["DeviceList"], device_list("Ascend910-7", "[]"));
}

TEST_F(KubePublish, RetriesWhileTheNamespaceIsMissing) {
  add_node();
  LogCapture log;
  // kube-system is not there (yet): each try reads ManuallySeparateNPU first (a 404 there: nothing to adopt),
  // then its create is answered 404; three tries.
  api.fail_next(404, 6);
  auto pub = start();
  ASSERT_TRUE(wait_until([&] { return api.get(kCmPath).is_object() && labelled(); }, 5s));
  EXPECT_EQ(pub->stats().failures, 3);
  EXPECT_EQ(log.count("namespace kube-system does not exist in the API server (create it, or run the plugin "
                      "with --no-kube)"),
            1)
      << "said once, not once per retry";
}

TEST_F(KubePublish, RetriesWhileTheApiServerIsAway) {
  add_node();
  api.fail_next(503, 4);
  auto pub = start();
  ASSERT_TRUE(wait_until([&] { return api.get(kCmPath).is_object() && labelled(); }, 5s));
  EXPECT_EQ(pub->stats().failures, 4);
}

TEST_F(KubePublish, WithoutItsNodeTheConfigMapIsStillWritten) {
  auto pub = start();  // no Node worker-1 in the API server
  ASSERT_TRUE(wait_until([&] { return api.get(kCmPath).is_object(); }, 5s));
  ASSERT_TRUE(wait_until([&] { return pub->stats().failures >= 2; }, kEventually))
      << "the labels are retried";
  add_node();
  ASSERT_TRUE(wait_until([&] { return labelled(); }, kEventually));
}

// The daemon with --kube-api publishes (no kubelet needed: it waits for one meanwhile).
TEST_F(KubePublish, DaemonWithKubeApiPublishes) {
  add_node();
  Config c;
  c.kubelet_socket_dir = tmp / "device-plugins";
  c.host_root = root;
  c.pod_resources_socket = "";
  c.vnpu_gc_interval = 0s;
  c.kube_api = api.url();
  c.node_name = kNode;
  auto d = Daemon::create(c, *query);
  ASSERT_TRUE(d.ok()) << d.error().message();
  Status run_status;
  std::thread runner([&] { run_status = (*d)->run(); });
  EXPECT_TRUE(
      wait_until([&] { return deviceinfo::from_configmap(api.get(kCmPath)).ok() && labelled(); }, 5s));
  (*d)->stop();
  runner.join();
  EXPECT_TRUE(run_status.ok()) << run_status.error().message();
}

}  // namespace
}  // namespace ascend::plugin
