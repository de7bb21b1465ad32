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
#include <filesystem>
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

  // A daemon's configuration against the stand-in: no pod resources, no vNPU gc, --dra with its sockets
  // in the test's folder.
  Config dra_daemon_config() const {
    Config c;
    c.kubelet_socket_dir = tmp / "device-plugins";
    c.host_root = root;
    c.pod_resources_socket = "";
    c.vnpu_gc_interval = 0s;
    c.kube_api = api.url();
    c.node_name = kNode;
    c.dra = true;
    c.dra_registry_dir = tmp / "plugins_registry";
    c.dra_plugin_dir = tmp / "plugins/npu.ascend.huawei.com";
    return c;
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

// ---- DRA (--dra): the chips as ResourceSlices -------------------------------------------------------

constexpr const char* kSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
constexpr const char* kSlicePath = "/apis/resource.k8s.io/v1/resourceslices/worker-1-npu.ascend.huawei.com-0";

class DraPublish : public KubePublish {
 protected:
  std::unique_ptr<KubePublisher> start_dra(bool vnpu = false) {
    KubePublisherOptions o;
    o.backoff_first = 50ms;
    o.backoff_max = 200ms;
    o.dra_slices = true;
    o.dra_vnpu = vnpu;
    return std::make_unique<KubePublisher>(*plugin, *client, kNode, o);
  }
  void add_labelled_node() {
    api.create("/api/v1/nodes", {{"apiVersion", "v1"},
                                 {"kind", "Node"},
                                 {"metadata",
                                  {{"name", kNode},
                                   {"labels",
                                    {{"topology.ascend.huawei.com/leaf", "leaf-2"},
                                     {"topology.ascend.huawei.com/spine", "spine-0"}}}}}});
  }
  // device name -> its "healthy" attribute, from the API server's slice.
  std::map<std::string, bool> health() {
    std::map<std::string, bool> out;
    const json s = api.get(kSlicePath);
    if (!s.is_object()) return out;
    for (const auto& d : s["spec"]["devices"]) out[d["name"]] = d["attributes"]["healthy"]["bool"];
    return out;
  }
  std::int64_t generation() { return api.get(kSlicePath)["spec"]["pool"]["generation"]; }
  int writes() {
    int n = 0;
    for (const auto& r : api.requests()) {
      if (r.path.starts_with(kSlicesPath) && r.method != "GET") ++n;
    }
    return n;
  }
};

TEST_F(DraPublish, TheNodesChipsAreOneResourceSliceItOwnsAndAFaultTurnsItsChipUnhealthy) {
  add_labelled_node();
  auto pub = start_dra();
  ASSERT_TRUE(wait_until([&] { return api.get(kSlicePath).is_object(); }, kEventually));
  const json s = api.get(kSlicePath);
  EXPECT_EQ(s["spec"]["driver"], "npu.ascend.huawei.com");
  EXPECT_EQ(s["spec"]["nodeName"], kNode);
  EXPECT_EQ(s["spec"]["pool"]["name"], kNode);
  EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 1);
  ASSERT_EQ(s["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(s["metadata"]["ownerReferences"][0]["uid"], api.get(kNodePath)["metadata"]["uid"]);
  EXPECT_EQ(s["metadata"]["ownerReferences"][0]["kind"], "Node");
  const std::map<std::string, bool> all_healthy = {{"npu-0", true}, {"npu-1", true}, {"npu-2", true},
                                                   {"npu-3", true}, {"npu-4", true}, {"npu-5", true},
                                                   {"npu-6", true}, {"npu-7", true}};
  EXPECT_EQ(health(), all_healthy);
  const json& a = s["spec"]["devices"][3]["attributes"];
  EXPECT_EQ(a["model"]["string"], "910B3");
  EXPECT_EQ(a["pcieBus"]["string"], "0000:82:00.0");  // a2-info.txt, NPU 3
  EXPECT_EQ(a["leaf"]["string"], "leaf-2");
  EXPECT_EQ(a["spine"]["string"], "spine-0");
  const auto g0 = generation();

  // A fault at SeparateNPU level (80E18402, Critical): chip 3 stays in the pool, unhealthy, in a newer
  // generation; the others are untouched.
  ASSERT_TRUE(emu.set_fault(3, 0x80E18402, npu::Health::kCritical).ok());
  auto want = all_healthy;
  want["npu-3"] = false;
  ASSERT_TRUE(wait_until([&] { return health() == want; }, kEventually)) << api.get(kSlicePath).dump();
  EXPECT_GT(generation(), g0);
  // Counted once the write's answer is back, which may be after the API server shows it.
  EXPECT_TRUE(wait_until([&] { return pub->stats().slice_writes >= 2; }, kEventually))
      << pub->stats().slice_writes;
}

TEST_F(DraPublish, ARestartedPublisherFindsTheSlicesRightAndWritesNothing) {
  add_labelled_node();
  auto pub = start_dra();
  ASSERT_TRUE(wait_until([&] { return api.get(kSlicePath).is_object(); }, kEventually));
  const auto g0 = generation();
  pub.reset();
  api.clear_requests();
  pub = start_dra();
  // Its first pass lists the slices (and writes the ConfigMap, whose labels were done): once the labels'
  // GET of the Node is there, the slices' pass is over.
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& r : api.requests())
          if (r.method == "GET" && r.path == kSlicesPath) return true;
        return false;
      },
      kEventually));
  ASSERT_TRUE(wait_until([&] { return pub->stats().passes >= 1; }, kEventually));
  EXPECT_EQ(writes(), 0);
  EXPECT_EQ(generation(), g0);
}

TEST_F(DraPublish, ASliceOfALargerPoolBeforeIsDeletedAndOthersSlicesAreLeftAlone) {
  add_labelled_node();
  auto stale = [](const std::string& name, const std::string& node, const std::string& driver) {
    return json{{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"name", name}}},
                {"spec",
                 {{"driver", driver},
                  {"nodeName", node},
                  {"pool", {{"name", node}, {"generation", 5}, {"resourceSliceCount", 2}}},
                  {"devices", json::array({{{"name", "npu-200"}}})}}}};
  };
  api.create(kSlicesPath, stale("worker-1-npu.ascend.huawei.com-1", kNode, "npu.ascend.huawei.com"));
  api.create(kSlicesPath, stale("worker-1-gpu", kNode, "gpu.example.com"));
  api.create(kSlicesPath, stale("worker-2-npu.ascend.huawei.com-0", "worker-2", "npu.ascend.huawei.com"));
  auto pub = start_dra();
  ASSERT_TRUE(wait_until(
      [&] {
        return api.get(kSlicePath).is_object() &&
               api.get(std::string(kSlicesPath) + "/worker-1-npu.ascend.huawei.com-1").is_null();
      },
      kEventually));
  EXPECT_EQ(generation(), 6) << "newer than the stale pool's";
  EXPECT_TRUE(api.get(std::string(kSlicesPath) + "/worker-1-gpu").is_object()) << "another driver's";
  EXPECT_TRUE(api.get(std::string(kSlicesPath) + "/worker-2-npu.ascend.huawei.com-0").is_object())
      << "another node's";
}

// --dra-vnpu on an API server whose DRAPartitionableDevices gate is on: the counters stay, so the vNPU
// devices follow the probe (8 chips of a 910B3 host: 2 vir10_3c_32g and 4 vir05_1c_16g each, 56 devices),
// and a restarted publisher sees the counters listed and writes nothing.
TEST_F(DraPublish, VnpusArePublishedWhenTheApiServerKeepsCounters) {
  add_labelled_node();
  LogCapture log;
  auto pub = start_dra(/*vnpu=*/true);
  ASSERT_TRUE(wait_until(
      [&] {
        const json s = api.get(kSlicePath);
        return s.is_object() && s["spec"]["devices"].size() == 56u;
      },
      kEventually))
      << api.get(kSlicePath).dump();
  const json s = api.get(kSlicePath);
  ASSERT_EQ(s["spec"]["sharedCounters"].size(), 8u);
  EXPECT_EQ(
      s["spec"]["sharedCounters"][0],
      json::parse(R"({"name":"npu-0","counters":{"aicore":{"value":"20"},"memory":{"value":"64Gi"}}})"));
  EXPECT_EQ(writes(), 2) << "the probe (chips with counters), then the vNPUs";
  EXPECT_EQ(log.count("DRAPartitionableDevices is off"), 0);
  const auto g = generation();
  pub.reset();
  api.clear_requests();
  pub = start_dra(true);
  ASSERT_TRUE(wait_until([&] { return pub->stats().passes >= 1; }, kEventually));
  EXPECT_EQ(writes(), 0);
  EXPECT_EQ(generation(), g);
}

// --dra-vnpu on an API server with the gate off (Kubernetes 1.34's default): it drops the counters silently.
// No vNPU device is ever published (the probe carries none), the chips alone stay, one warning says why, and
// later changes write the chips alone again, with no second warning and no write back and forth.
TEST_F(DraPublish, WithTheGateOffTheChipsAloneArePublishedWithOneWarningAndNoFlapping) {
  api.set_partitionable_devices(false);
  add_labelled_node();
  LogCapture log;
  auto pub = start_dra(/*vnpu=*/true);
  ASSERT_TRUE(wait_until([&] { return log.count("DRAPartitionableDevices is off") == 1; }, kEventually));
  ASSERT_TRUE(wait_until([&] { return pub->stats().passes >= 1; }, kEventually));
  const json s = api.get(kSlicePath);
  EXPECT_EQ(s["spec"]["devices"].size(), 8u) << s.dump();
  EXPECT_FALSE(s["spec"].contains("sharedCounters"));
  for (const auto& r : api.requests()) {
    if (r.path.starts_with(kSlicesPath) && r.method != "GET") {
      EXPECT_EQ(r.body.find("vir05"), std::string::npos) << "a vNPU device was sent: " << r.body;
    }
  }
  EXPECT_EQ(writes(), 1) << "the probe alone: what the server kept is the chips-only pool";
  std::this_thread::sleep_for(300ms);  // passes that find nothing to do
  EXPECT_EQ(writes(), 1);

  ASSERT_TRUE(emu.set_fault(3, 0x80E18402, npu::Health::kCritical).ok());
  ASSERT_TRUE(wait_until([&] { return health()["npu-3"] == false; }, kEventually));
  ASSERT_TRUE(emu.clear_faults(3).ok());
  ASSERT_TRUE(wait_until([&] { return health()["npu-3"] == true; }, kEventually));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(writes(), 3) << "one write a change, chips only";
  EXPECT_EQ(api.get(kSlicePath)["spec"]["devices"].size(), 8u);
  EXPECT_EQ(log.count("DRAPartitionableDevices is off"), 1);
  for (const auto& r : api.requests()) {
    if (r.path.starts_with(kSlicesPath) && r.method != "GET") {
      EXPECT_EQ(r.body.find("vir05"), std::string::npos) << r.body;
    }
  }
}

TEST_F(DraPublish, DraWithoutTheApiServerIsRefusedWithAReason) {
  Config c;
  c.kubelet_socket_dir = tmp / "device-plugins";
  c.host_root = root;
  c.dra = true;
  c.no_kube = true;
  auto v = validate(c);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message().find("--dra publishes ResourceSlices through the API server"),
            std::string::npos)
      << v.error().message();
  c.no_kube = false;  // and no --kubeconfig, --kube-api or in-cluster configuration
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto d = Daemon::create(c, *query);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("--dra needs the API server"), std::string::npos) << d.error().message();
}

// The daemon with --kube-api publishes (no kubelet needed: it waits for one meanwhile).
TEST_F(KubePublish, DaemonWithKubeApiPublishes) {
  add_node();
  const Config c = dra_daemon_config();
  auto d = Daemon::create(c, *query);
  ASSERT_TRUE(d.ok()) << d.error().message();
  Status run_status;
  std::thread runner([&] { run_status = (*d)->run(); });
  EXPECT_TRUE(
      wait_until([&] { return deviceinfo::from_configmap(api.get(kCmPath)).ok() && labelled(); }, 5s));
  EXPECT_TRUE(wait_until([&] { return api.get(kSlicePath).is_object(); }, kEventually)) << "--dra";
  // --dra serves the kubelet's DRA sockets, and no Device Plugin resource (one allocator per chip).
  EXPECT_TRUE(wait_until(
      [&] { return std::filesystem::exists(tmp / "plugins_registry/npu.ascend.huawei.com-reg.sock"); },
      kEventually));
  EXPECT_TRUE((*d)->plugin().resources().size() >= 1u);
  EXPECT_FALSE(std::filesystem::exists(tmp / "device-plugins/ascend-Ascend910.sock"));
  (*d)->stop();
  runner.join();
  EXPECT_TRUE(run_status.ok()) << run_status.error().message();
}

// The daemon with --dra --dra-vnpu: the publisher gets the flag (the stand-in keeps counters: the vNPU
// devices of 8 x 910B3 follow, 56 devices), and the DRA service starts.
TEST_F(KubePublish, DaemonWithDraVnpuPublishesTheVnpus) {
  add_node();
  Config c = dra_daemon_config();
  c.dra_vnpu = true;
  c.dra_cdi_dir = tmp / "cdi";
  ASSERT_TRUE(validate(c).ok());
  auto d = Daemon::create(c, *query);
  ASSERT_TRUE(d.ok()) << d.error().message();
  Status run_status;
  std::thread runner([&] { run_status = (*d)->run(); });
  EXPECT_TRUE(wait_until(
      [&] {
        const json s = api.get(kSlicePath);
        return s.is_object() && s["spec"]["devices"].size() == 56u;
      },
      kEventually))
      << api.get(kSlicePath).dump();
  EXPECT_TRUE(wait_until(
      [&] { return std::filesystem::exists(tmp / "plugins_registry/npu.ascend.huawei.com-reg.sock"); },
      kEventually));
  (*d)->stop();
  runner.join();
  EXPECT_TRUE(run_status.ok()) << run_status.error().message();
}

}  // namespace
}  // namespace ascend::plugin
