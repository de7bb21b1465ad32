// The NPU Exporter metrics end to end (issue 26): ascend-device-plugin's daemon on an emulated Atlas 800T
// A2 (through the backend under test), a fake kubelet whose pod-resources List says pod train/job-0's
// container "worker" holds chips 0-3, /metrics scraped over HTTP. Work started with `npu-sim load-gen` on
// chip 1 shows on the next scrape with the pod's labels; a fault set with `npu-sim fault set` on chip 2
// shows in its health and error code on the next scrape. Expected values: the atlas800t-a2 profile (chip 1:
// HBM 3314 of 65536 MB, 39 C) under the load model of npu-smi-sim's workload.h (39 + 35 x 0.8 = 67 C).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/workload.h"
#include "ascend/plugin/config.h"
#include "ascend/plugin/daemon.h"
#include "ascend/plugin/options.h"
#include "fake_kubelet.h"
#include "plugin_fixture.h"
#include "run_command.h"
#include "test_backend.h"
#include "test_dir.h"
#include "test_query.h"

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::TempDir;

const std::string kSim = std::string(ASCEND_BIN_DIR) + "/npu-sim";

std::string scrape(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return "";
  return r->body;
}

// The sample of `name` for chip `id` (its whole line), or "" when there is none.
std::string sample(const std::string& body, const std::string& name, int id) {
  std::istringstream in(body);
  std::string line;
  const std::string key = ",id=\"" + std::to_string(id) + "\",";
  while (std::getline(in, line)) {
    if (line.rfind(name + "{", 0) == 0 && line.find(key) != std::string::npos) return line;
  }
  return "";
}

std::string value_of(const std::string& line) {
  return line.substr(line.rfind(' ') + 1);
}

class MetricsE2E : public testing::PluginFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(load("atlas800t-a2", kMajors, /*force=*/false));
    kubelet = std::make_unique<FakeKubelet>(dir, tmp / "pod-resources.sock");
    kubelet->set_pods({{"train",
                        "job-0",
                        "worker",
                        "huawei.com/Ascend910",
                        {"Ascend910-0", "Ascend910-1", "Ascend910-2", "Ascend910-3"}}});
    Config cfg = config();
    cfg.metrics_addr = "127.0.0.1:0";
    cfg.no_kube = true;
    serve(cfg);
  }

  void sim(std::vector<std::string> args) {
    args.insert(args.begin(), kSim);
    args.insert(args.end(), {"--root", root});
    auto r = ascend::testing::run_command(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
};

TEST_F(MetricsE2E, LoadOnAPodsChipShowsWithItsLabelsAndAFaultInItsHealthAndErrorCode) {
  const int port = daemon->metrics_port();
  ASSERT_GT(port, 0);
  std::string body = scrape(port);
  ASSERT_FALSE(body.empty());
  EXPECT_NE(body.find("\nmachine_npu_nums 8\n"), std::string::npos) << body;
  // Idle: chip 1 is the pod's, chip 5 nobody's; the plugin's own metrics are still there.
  std::string util1 = sample(body, "npu_chip_info_utilization", 1);
  EXPECT_NE(util1.find("namespace=\"train\""), std::string::npos) << util1;
  EXPECT_NE(util1.find("pod_name=\"job-0\""), std::string::npos) << util1;
  EXPECT_NE(util1.find("container_name=\"worker\""), std::string::npos) << util1;
  EXPECT_NE(util1.find("model_name=\"910B3-Ascend-V1\""), std::string::npos) << util1;
  EXPECT_NE(util1.find("pcie_bus_info=\"0000:C2:00.0\""), std::string::npos) << util1;
  EXPECT_EQ(value_of(util1), "0");
  EXPECT_NE(sample(body, "npu_chip_info_utilization", 5).find("pod_name=\"\""), std::string::npos);
  EXPECT_EQ(sample(body, "container_npu_utilization", 5), "");
  EXPECT_NE(body.find("\nascend_npu_healthy{device=\"1\"} 1\n"), std::string::npos);

  sim({"load-gen", "--device", "1", "--util", "80", "--hbm", "16"});
  body = scrape(port);
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_utilization", 1)), "80") << body;
  EXPECT_EQ(value_of(sample(body, "container_npu_utilization", 1)), "80");
  EXPECT_NE(sample(body, "container_npu_utilization", 1).find("pod_name=\"job-0\""), std::string::npos);
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_hbm_used_memory", 1)), "19698");
  EXPECT_EQ(value_of(sample(body, "container_npu_used_memory", 1)), "19698");
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_temperature", 1)), "67");
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_utilization", 0)), "0");  // the pod's other chips idle
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_health_status", 2)), "1");
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_error_code", 2)), "0");

  sim({"fault", "set", "--device", "2", "--code", "0x80E18402"});
  body = scrape(port);
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_health_status", 2)), "0") << body;
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_error_code", 2)), "2162263042");  // 0x80E18402
  EXPECT_NE(sample(body, "npu_chip_info_error_code", 2).find("pod_name=\"job-0\""), std::string::npos);
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_health_status", 3)), "1");

  sim({"link", "--device", "3", "down"});
  body = scrape(port);
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_link_status", 3)), "0") << body;
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_network_status", 3)), "0");
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_link_status", 4)), "1");

  // The pod ends: its labels go with it.
  kubelet->set_pods({});
  body = scrape(port);
  EXPECT_NE(sample(body, "npu_chip_info_utilization", 1).find("pod_name=\"\""), std::string::npos) << body;
  EXPECT_EQ(body.find("npu_container_info"), std::string::npos);
}

// An emulated Atlas 800T A2 without device nodes (no root needed): what --metrics-only and --telegraf read.
Status load_a2(npu::Emulator& emu) {
  npu::LoadOptions opts;
  opts.majors = npu::DeviceMajors{240, 241, 242, 243, 244};
  opts.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
  opts.make_nodes = false;
  return emu.load(*npu::builtin_profile("atlas800t-a2"), opts);
}

// --metrics-only: a host with no kubelet at all. /metrics answers with the chips and no pod labels; no
// plugin socket is made.
TEST(MetricsOnly, ServesTheMetricsWithoutAKubelet) {
  TempDir tmp;
  npu::Emulator emu(tmp / "host");
  ASSERT_TRUE(load_a2(emu).ok());
  auto cfg = parse_options({"--metrics-only", "--metrics-addr", "127.0.0.1:0", "--host-root", tmp / "host",
                            "--kubelet-socket-dir", tmp / "device-plugins", "--pod-resources-socket",
                            tmp / "none.sock"});
  ASSERT_TRUE(cfg.ok()) << cfg.error().message();
  ASSERT_TRUE(validate(*cfg).ok());
  auto query = ascend::testing::open_test_query(tmp / "host");
  ASSERT_TRUE(query);
  auto d = Daemon::create(*cfg, *query);
  ASSERT_TRUE(d.ok()) << d.error().message();
  Status st;
  std::thread runner([&] { st = (*d)->run(); });
  ASSERT_TRUE(emu.set_workload(npu::Workload{6, 40, 0, 0, 0}).ok());
  const std::string body = scrape((*d)->metrics_port());
  (*d)->stop();
  runner.join();
  EXPECT_TRUE(st.ok()) << st.error().message();
  EXPECT_NE(body.find("\nmachine_npu_nums 8\n"), std::string::npos) << body;
  EXPECT_EQ(value_of(sample(body, "npu_chip_info_utilization", 6)), "40") << body;
  EXPECT_NE(sample(body, "npu_chip_info_utilization", 6).find("pod_name=\"\""), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(tmp / "device-plugins/ascend-Ascend910.sock"));
}

TEST(MetricsOnly, NeedsAnAddressAndNoKubernetesPeers) {
  Config c;
  c.metrics_only = true;
  EXPECT_EQ(validate(c).error().message(), "--metrics-only needs --metrics-addr host:port");
  c.metrics_addr = ":9101";
  EXPECT_TRUE(validate(c).ok());
  c.scheduler_url = "http://127.0.0.1:8888";
  EXPECT_EQ(validate(c).error().code(), EINVAL);
}

// --telegraf, the binary as Telegraf's execd input runs it: its stdin a pipe that closes after 3 s (Telegraf
// stopping it), its stdout the lines. Chip 1 under load-gen 80 % shows as the profile and the load model give
// it (the file's header: 67 C; HBM 3314 MB = 3474980864 B, 5 % of 65536 MB), chip 2's fault as health 0 and
// its code (0x80E18402 = 2162263042); each gather is one line per chip; the plugin exits 0 when its input
// closes and logs nothing to stdout.
TEST(Telegraf, TheBinaryWritesNpuExportersLinesUntilItsInputCloses) {
  TempDir tmp;
  npu::Emulator emu(tmp / "host");
  ASSERT_TRUE(load_a2(emu).ok());
  ASSERT_TRUE(emu.set_workload(npu::Workload{1, 80, 0, 0, 0}).ok());
  auto fault = ascend::testing::run_command(
      {kSim, "fault", "set", "--device", "2", "--code", "0x80E18402", "--root", tmp / "host"});
  ASSERT_EQ(fault.exit_code, 0) << fault.err;
  const std::string plugin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
  auto r = ascend::testing::run_command(
      {"/bin/sh", "-c", "sleep 3 | exec \"$0\" \"$@\"", plugin, "--telegraf", "--host-root", tmp / "host",
       "--backend", ascend::testing::test_backend(), "--kubelet-socket-dir", tmp / "device-plugins"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::map<std::string, std::vector<std::string>> by_chip;
  while (std::getline(in, line)) by_chip[line.substr(0, line.find(' '))].push_back(line);
  ASSERT_EQ(by_chip.size(), 8U) << r.out;
  for (const auto& [chip, lines] : by_chip) {
    EXPECT_GE(lines.size(), 2U) << chip << ": a gather at once and at least one a second later";
    EXPECT_EQ(lines.size(), by_chip.begin()->second.size()) << chip << ": one line per chip per gather";
  }
  const std::string busy = by_chip["Ascend910-1"].back();
  EXPECT_NE(busy.find(" npu_chip_info_hbm_used_memory=3474980864i,npu_chip_info_hbm_utilization=5,"
                      "npu_chip_info_health_status=1i,"),
            std::string::npos)
      << busy;
  EXPECT_NE(busy.find(",npu_chip_info_temperature=67,npu_chip_info_utilization=80 "), std::string::npos)
      << busy;
  const std::string sick = by_chip["Ascend910-2"].back();
  EXPECT_NE(sick.find(" npu_chip_info_error_code_0=2162263042i,"), std::string::npos) << sick;
  EXPECT_NE(sick.find(",npu_chip_info_health_status=0i,"), std::string::npos) << sick;
  EXPECT_NE(r.err.find("--telegraf"), std::string::npos) << "the log goes to stderr: " << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "device-plugins/ascend-Ascend910.sock"));
}

TEST(Telegraf, TakesNoKubernetesPeersAndAnIntervalInRange) {
  Config c;
  c.telegraf = true;
  EXPECT_TRUE(validate(c).ok()) << "no /metrics address needed";
  c.kube_api = "https://127.0.0.1:6443";
  EXPECT_EQ(validate(c).error().message(),
            "--telegraf writes the NPU metrics for Telegraf alone: it cannot go with --scheduler-url, "
            "--kubeconfig or --kube-api");
  EXPECT_FALSE(parse_options({"--telegraf", "--telegraf-interval", "0"}).ok());
  auto ok = parse_options({"--telegraf", "--telegraf-interval", "10"});
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->telegraf_interval, std::chrono::seconds(10));
}

}  // namespace
}  // namespace ascend::plugin
