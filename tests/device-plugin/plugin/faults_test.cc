// Graded faults (issue 23): the fault-code table (the shipped file, an override, refusals naming the line),
// the levels and the escalation (FaultGrades), and on an emulated host with the API server stand-in: a
// SeparateNPU code makes the chip Unhealthy, a RestartRequest code does not, three faults isolate the chip
// until an operator removes it from ManuallySeparateNPU. Expected levels are the MindCluster lists quoted
// in faults/fault-codes.yaml, not the code's output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "ascend/common/kube_client.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/faults.h"
#include "ascend/plugin/kube_publisher.h"
#include "ascend/plugin/plugin.h"
#include "fake_apiserver.h"
#include "log_capture.h"
#include "plugin_on_api.h"
#include "test_dir.h"
#include "test_query.h"

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using api_test::wait_until;
using nlohmann::json;
using testing::TempDir;

// ---- the table ----

TEST(FaultTable, ShippedTableGivesMindClustersLevels) {
  const FaultTable& t = FaultTable::builtin();
  struct Case {
    std::uint32_t code;
    FaultLevel want;
  };
  // One code of each list of MindCluster's default faultCode.json.
  const Case cases[] = {{0x80E21007, FaultLevel::kNotHandleFault},
                        {0x80C98008, FaultLevel::kRestartRequest},
                        {0x80E01801, FaultLevel::kRestartBusiness},
                        {0x8C0E4E00, FaultLevel::kFreeRestartNPU},
                        {0x80E18005, FaultLevel::kRestartNPU},
                        {0x81B18603, FaultLevel::kPreSeparateNPU},
                        {0x80E18402, FaultLevel::kSeparateNPU},
                        {0x80818C00, FaultLevel::kSeparateNPU},
                        // In both RestartBusiness and SeparateNPU: the most severe.
                        {0xA2301001, FaultLevel::kSeparateNPU}};
  for (const auto& c : cases) EXPECT_EQ(t.level(c.code), c.want) << std::hex << c.code;
  EXPECT_GT(t.size(), 300u);
  EXPECT_EQ(t.escalation(), (Escalation{3, 86400s}));
}

TEST(FaultTable, UnknownCodeGetsTheDefaultByItsSeverity) {
  const FaultTable& t = FaultTable::builtin();
  EXPECT_EQ(t.default_level(), FaultLevel::kSeparateNPU);
  EXPECT_EQ(t.level(0x12345678u), FaultLevel::kSeparateNPU);
  EXPECT_EQ(t.level(npu::Fault{0x12345678u, npu::Health::kCritical}), FaultLevel::kSeparateNPU);
  EXPECT_EQ(t.level(npu::Fault{0x12345678u, npu::Health::kAlarm}), FaultLevel::kSeparateNPU);
  EXPECT_EQ(t.level(npu::Fault{0x12345678u, npu::Health::kWarning}), FaultLevel::kNotHandleFault);
  // A known code keeps its level whatever the severity.
  EXPECT_EQ(t.level(npu::Fault{0x80C98008u, npu::Health::kCritical}), FaultLevel::kRestartRequest);
}

TEST(FaultTable, BadFilesAreRefusedNamingTheLine) {
  struct Case {
    std::string text;
    std::string want;  // in the one-line message
  };
  const Case cases[] = {
      {"levels:\n  SeparateNPU: [80E18402]\n  Sometimes: [80E18403]\n",
       "t.yaml:3: 'Sometimes' is not a level"},
      {"levels:\n  SeparateNPU: [80E18402,\n    XYZ]\n", "t.yaml:3: 'XYZ' is not a fault code"},
      {"levels:\n  SeparateNPU: [123456789]\n", "t.yaml:2: '123456789' is not a fault code"},
      {"escalation:\n  times: 0\n", "t.yaml:2: escalation.times must be"},
      {"default_level: ManuallySeparateNPU\n", "t.yaml:1: 'ManuallySeparateNPU' is not a level"},
      {"colour: red\n", "t.yaml:1: unknown key 'colour'"},
      {"levels: [a, b\n", "t.yaml:"},
  };
  for (const auto& c : cases) {
    auto r = FaultTable::parse(c.text, "t.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message().find(c.want), std::string::npos) << r.error().message();
    EXPECT_EQ(r.error().message().find('\n'), std::string::npos) << r.error().message();
  }
}

TEST(FaultTable, AFileReadOverTheBuiltInMovesOnlyWhatItNames) {
  TempDir tmp;
  const std::string path = tmp / "fault-codes.yaml";
  std::ofstream(path) << "default_level: RestartNPU\nescalation: {times: 2, window_seconds: 60}\n"
                         "levels:\n  NotHandleFault: [0x80E18402]\n";
  auto t = FaultTable::load_over(FaultTable::builtin(), path);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->level(0x80E18402), FaultLevel::kNotHandleFault);
  EXPECT_EQ(t->level(0x80C98008), FaultLevel::kRestartRequest);  // untouched
  EXPECT_EQ(t->default_level(), FaultLevel::kRestartNPU);
  EXPECT_EQ(t->escalation(), (Escalation{2, 60s}));
  EXPECT_FALSE(FaultTable::load_over(FaultTable::builtin(), tmp / "absent.yaml").ok());
}

// ---- the grades ----

npu::DeviceSnapshot host_with(std::vector<std::vector<npu::Fault>> faults) {
  npu::DeviceSnapshot s;
  for (std::size_t i = 0; i < faults.size(); ++i) {
    npu::Chip c;
    c.phy_id = static_cast<int>(i);
    c.faults = faults[i];
    s.chips.push_back(c);
  }
  return s;
}

bool healthy_in_view(const FaultGrades& g, int phy) {
  return is_healthy(g.view().chips[static_cast<std::size_t>(phy)].health());
}

TEST(FaultGrades, HealthFollowsTheLevelNotTheSeverity) {
  FaultGrades g(FaultTable::builtin());
  const auto now = FaultGrades::Clock::now();
  auto changes = g.observe(host_with({{},
                                      {{0x80C98008, npu::Health::kCritical}},
                                      {{0x80E18402, npu::Health::kWarning}},
                                      {{0x81B18603, npu::Health::kWarning}}}),
                           now);
  EXPECT_TRUE(healthy_in_view(g, 0));
  EXPECT_TRUE(healthy_in_view(g, 1)) << "RestartRequest keeps the chip usable";
  EXPECT_FALSE(healthy_in_view(g, 2)) << "SeparateNPU";
  EXPECT_FALSE(healthy_in_view(g, 3)) << "PreSeparateNPU";
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].phy_id, 1);
  EXPECT_EQ(changes[0].to, FaultLevel::kRestartRequest);
  EXPECT_NE(changes[0].why.find("80C98008"), std::string::npos);
  EXPECT_EQ(g.level(2), FaultLevel::kSeparateNPU);
}

TEST(FaultGrades, ThreeFaultsInTheWindowIsolateUntilCleared) {
  FaultGrades g(FaultTable::builtin());  // 3 within 86400 s
  auto t = FaultGrades::Clock::now();
  const auto faulty = host_with({{{0x80C98008, npu::Health::kWarning}}});
  const auto clean = host_with({{}});
  for (int i = 0; i < 2; ++i) {
    g.observe(faulty, t += 1s);
    g.observe(clean, t += 1s);
  }
  EXPECT_TRUE(g.isolated().empty()) << "two faults";
  auto changes = g.observe(faulty, t += 1s);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].to, FaultLevel::kManuallySeparateNPU);
  EXPECT_EQ(g.isolated(), std::set<int>{0});
  g.observe(clean, t += 1s);
  EXPECT_FALSE(healthy_in_view(g, 0)) << "stays isolated after the fault clears";
  EXPECT_EQ(g.level(0), FaultLevel::kManuallySeparateNPU);
  changes = g.clear(0);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].to, FaultLevel::kNormal);
  EXPECT_TRUE(healthy_in_view(g, 0));
  g.observe(faulty, t += 1s);
  EXPECT_TRUE(g.isolated().empty()) << "the history went with the isolation";
}

TEST(FaultGrades, FaultsOutsideTheWindowAndNotHandleFaultsDoNotCount) {
  FaultGrades g(FaultTable::builtin());
  auto t = FaultGrades::Clock::now();
  for (int i = 0; i < 3; ++i) {
    g.observe(host_with({{{0x80C98008, npu::Health::kWarning}}}), t += 50000s);
    g.observe(host_with({{}}), t += 1s);
  }
  for (int i = 0; i < 5; ++i) {
    g.observe(host_with({{{0x80E21007, npu::Health::kWarning}}}), t += 1s);
    g.observe(host_with({{}}), t += 1s);
  }
  EXPECT_TRUE(g.isolated().empty());
}

TEST(IsolationEdits, AdoptsAtStartThenFollowsTheOperator) {
  EXPECT_EQ(isolation_edits({1, 3}, std::nullopt), (IsolationEdits{{1, 3}, {}}));
  EXPECT_EQ(isolation_edits({3}, std::vector<int>{1, 3}), (IsolationEdits{{}, {1}}));
  EXPECT_EQ(isolation_edits({3, 5}, std::vector<int>{3}), (IsolationEdits{{5}, {}}));
}

// ---- an emulated host, the plugin and the API server stand-in ----

constexpr const char* kNode = "worker-1";
constexpr const char* kCmPath = "/api/v1/namespaces/kube-system/configmaps/mindx-dl-deviceinfo-worker-1";

class GradedHost : public api_test::PluginOnApi {
 protected:
  void SetUp() override {
    start_plugin(50ms);
    if (HasFatalFailure()) return;
    api.create(
        "/api/v1/nodes",
        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}, {"uid", "node-uid-1"}}}});
  }

  std::unique_ptr<KubePublisher> start() {
    KubePublisherOptions o;
    o.refresh_every = 200ms;
    o.backoff_first = 50ms;
    o.backoff_max = 200ms;
    return std::make_unique<KubePublisher>(*plugin, *client, kNode, o);
  }

  bool listed_healthy(int phy) {
    for (const auto& d : plugin->list(plugin->resources().front()).devices)
      if (d.phy == phy) return is_healthy(d.health);
    return false;
  }

  json device_list() {
    const auto cm = api.get(kCmPath);
    if (!cm.is_object()) return nullptr;
    return json::parse(cm["data"]["DeviceInfoCfg"].get<std::string>())["DeviceInfo"]["DeviceList"];
  }

  json fault_entry(int phy) {
    const auto list = device_list();
    if (!list.is_object()) return nullptr;
    for (const auto& f : json::parse(list["huawei.com/Ascend910-Fault"].get<std::string>()))
      if (f["npu_name"] == "Ascend910-" + std::to_string(phy)) return f;
    return nullptr;
  }
};

TEST_F(GradedHost, SeparateNpuCodeIsUnhealthyRestartRequestIsNot) {
  ascend::testing::LogCapture log;
  auto pub = start();
  ASSERT_TRUE(emu.set_fault(3, 0x80E18402, npu::Health::kWarning).ok());   // SeparateNPU
  ASSERT_TRUE(emu.set_fault(5, 0x80C98008, npu::Health::kCritical).ok());  // RestartRequest
  ASSERT_TRUE(wait_until([&] { return !listed_healthy(3); }, 5s));
  EXPECT_TRUE(listed_healthy(5));
  ASSERT_TRUE(wait_until([&] { return fault_entry(5).is_object() && fault_entry(3).is_object(); }, 5s));
  EXPECT_EQ(fault_entry(3)["fault_level"], "SeparateNPU");
  EXPECT_EQ(fault_entry(3)["fault_code"], "80E18402");
  EXPECT_EQ(fault_entry(5)["fault_level"], "RestartRequest");
  EXPECT_EQ(fault_entry(5)["large_model_fault_level"], "RestartRequest");
  EXPECT_EQ(device_list()["huawei.com/Ascend910-Unhealthy"], "Ascend910-3");
  // Each change of level is an Event on the Node (Warning when it takes the chip out) and one log line.
  std::map<std::string, std::pair<std::string, std::string>> by_chip;  // chip -> (type, note)
  ASSERT_TRUE(wait_until(
      [&] {
        by_chip.clear();
        const json events = api.list("/apis/events.k8s.io/v1/namespaces/default/events");
        for (const auto& e : events["items"]) {
          if (e.value("reason", "") != "AscendFaultLevel" || e["regarding"].value("kind", "") != "Node")
            continue;
          const std::string note = e.value("note", "");
          by_chip[note.substr(0, note.find(':'))] = {e.value("type", ""), note};
        }
        return by_chip.size() == 2;
      },
      5s));
  EXPECT_EQ(by_chip["Ascend910-3"].first, "Warning");
  EXPECT_NE(by_chip["Ascend910-3"].second.find(" -> SeparateNPU (Unhealthy): "), std::string::npos)
      << by_chip["Ascend910-3"].second;
  EXPECT_EQ(by_chip["Ascend910-5"].first, "Normal");
  EXPECT_NE(by_chip["Ascend910-5"].second.find(" -> RestartRequest (usable): "), std::string::npos)
      << by_chip["Ascend910-5"].second;
  EXPECT_EQ(log.count("chip 3: fault level "), 1);
  EXPECT_EQ(
      log.lines("chip 3: fault level ").at(0).find(" -> SeparateNPU (Unhealthy): ") != std::string::npos,
      true);
  EXPECT_EQ(log.count("chip 5: fault level "), 1);
}

TEST_F(GradedHost, ThreeFaultsIsolateTheChipUntilTheOperatorRemovesIt) {
  auto pub = start();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(emu.set_fault(2, 0x80C98008, npu::Health::kWarning).ok());  // RestartRequest: usable
    ASSERT_TRUE(wait_until([&] { return !plugin->chip_faults().empty(); }, 5s));
    ASSERT_TRUE(emu.clear_faults(2).ok());
    ASSERT_TRUE(wait_until([&] { return plugin->chip_faults().empty() || !plugin->isolated().empty(); }, 5s));
  }
  EXPECT_EQ(plugin->isolated(), std::set<int>{2});
  EXPECT_FALSE(listed_healthy(2)) << "isolated after its fault cleared";
  ASSERT_TRUE(wait_until(
      [&] {
        return api.get(kCmPath).is_object() &&
               api.get(kCmPath)["data"]["ManuallySeparateNPU"] == "Ascend910-2";
      },
      5s));
  // Refreshes (every 200 ms, each one a write of the ConfigMap) do not clear it: judged after two of them.
  auto cm_writes = [&] {
    int n = 0;
    for (const auto& r : api.requests()) n += r.method != "GET" && r.path == kCmPath ? 1 : 0;
    return n;
  };
  const int writes = cm_writes();
  ASSERT_TRUE(wait_until([&] { return cm_writes() >= writes + 2; }, 30s)) << "no refresh wrote the ConfigMap";
  EXPECT_FALSE(listed_healthy(2));

  // The operator removes it from ManuallySeparateNPU.
  api.patch(kCmPath, json::parse(R"({"data": {"ManuallySeparateNPU": ""}})"));
  ASSERT_TRUE(wait_until([&] { return listed_healthy(2); }, 5s));
  EXPECT_TRUE(plugin->isolated().empty());
}

TEST_F(GradedHost, AChipNamedInManuallySeparateNpuAtStartIsIsolated) {
  json cm = deviceinfo::to_configmap({kNode, "huawei.com/Ascend910", {}, {}, {}, {}, 1, -2, -2, {6}});
  api.create("/api/v1/namespaces/kube-system/configmaps", cm);
  auto pub = start();
  ASSERT_TRUE(wait_until([&] { return !listed_healthy(6); }, 5s));
  EXPECT_EQ(plugin->isolated(), std::set<int>{6});
}

}  // namespace
}  // namespace ascend::plugin
