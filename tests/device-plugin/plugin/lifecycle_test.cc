// The device plugin when things go wrong under it (issue 14): the emulated driver unloaded and loaded again
// (other majors) while the plugin runs, a device query that starts failing (as DCMI would), an Allocate whose
// ids the plugin did not prefer, and the periodic gc of dynamic vNPUs whose container is gone. Against the
// fake kubelet and an emulated host in a temporary root; device nodes only as root.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/vnpu_gc.h"
#include "ascend/plugin/daemon.h"
#include "ascend/plugin/plugin.h"
#include "eventually.h"
#include "fake_kubelet.h"
#include "log_capture.h"
#include "plugin_fixture.h"
#include "test_dir.h"
#include "test_query.h"

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::TempDir;

bool all_are(const v1beta1::ListAndWatchResponse& r, int n, const std::string& health) {
  if (r.devices_size() != n) return false;
  return std::all_of(r.devices().begin(), r.devices().end(),
                     [&](const auto& d) { return d.health() == health; });
}

using ascend::testing::LogCapture;

class LifecycleE2E : public testing::PluginFixture {
 protected:
  Config config() const {
    Config c = PluginFixture::config();
    c.vnpu_gc_interval = 0s;
    return c;
  }

  void up(const Config& cfg, int registrations = 1) {
    load("atlas800t-a2", {240, 241, 242, 243, 244});
    serve(cfg, registrations);
  }

  std::vector<std::string> preferred(const std::string& endpoint, const std::vector<std::string>& available,
                                     int size) {
    auto stub = kubelet->plugin(endpoint);
    v1beta1::PreferredAllocationRequest req;
    auto* cr = req.add_container_requests();
    for (const auto& id : available) cr->add_available_deviceids(id);
    cr->set_allocation_size(size);
    grpc::ClientContext ctx;
    v1beta1::PreferredAllocationResponse resp;
    grpc::Status s = stub->GetPreferredAllocation(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok() || resp.container_responses_size() != 1) return {};
    return {resp.container_responses(0).deviceids().begin(), resp.container_responses(0).deviceids().end()};
  }
};

std::vector<std::string> chip_ids(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i <= to; ++i) out.push_back("Ascend910-" + std::to_string(i));
  return out;
}

// How long the devices take to turn Unhealthy is printed, not asserted (a busy machine would fail a bound).
TEST_F(LifecycleE2E, DriverUnloadedTurnsEveryDeviceUnhealthyAndReloadRecoversWithNewNodes) {
  LogCapture log;
  Config cfg = config();
  cfg.allocate_mode = AllocateMode::kDeviceSpec;
  up(cfg);
  auto w = kubelet->watch("ascend-Ascend910.sock");
  ASSERT_TRUE(w->wait_for([](const auto& r) { return all_are(r, 8, "Healthy"); }, 5s));

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(emu.unload().ok());
  ASSERT_TRUE(w->wait_for([](const auto& r) { return all_are(r, 8, "Unhealthy"); }, testing::kEventually))
      << "the devices did not turn Unhealthy when the driver went away";
  std::printf("driver unloaded -> all Unhealthy in %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
                      .count()));
  // Nothing stale is served while the driver is away.
  grpc::Status s;
  allocate("ascend-Ascend910.sock", {{"Ascend910-1"}}, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("NPU driver is unavailable"), std::string::npos) << s.error_message();
  // More checks fail meanwhile (a wait that cannot make the assertion fail, only miss a repeat): one line.
  std::this_thread::sleep_for(3 * cfg.health_interval);
  EXPECT_EQ(log.lines("NPU driver unavailable").size(), 1U);

  // Back with other majors: Healthy again, and Allocate names nodes of the new driver.
  load("atlas800t-a2", {250, 251, 252, 253, 254});
  ASSERT_TRUE(w->wait_for([](const auto& r) { return all_are(r, 8, "Healthy"); }, testing::kEventually));
  EXPECT_EQ(daemon->plugin().host().chip_node(1).major, 250);
  auto resp = allocate("ascend-Ascend910.sock", {{"Ascend910-1"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(resp.container_responses(0).devices_size(), 1);
  const auto& dev = resp.container_responses(0).devices(0);
  EXPECT_EQ(dev.host_path(), root + "/dev/davinci1");
  if (::geteuid() == 0) {
    struct stat st {};
    ASSERT_EQ(::stat(dev.host_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_rdev, makedev(250, 1));
  }
  EXPECT_EQ(log.lines("NPU driver answers again").size(), 1U);
}

TEST_F(LifecycleE2E, AReloadBetweenTwoChecksIsNoticedByItsNewMajors) {
  up(config());
  ASSERT_TRUE(emu.unload().ok());
  load("atlas800t-a2", {245, 246, 247, 248, 249});
  EXPECT_TRUE(testing::eventually([&] { return daemon->plugin().host().chip_node(0).major == 245; }));
  EXPECT_EQ(daemon->plugin().host().control_nodes().at(0).major, 246);  // davinci_manager
}

// ---- Allocate with ids the plugin did not prefer ---------------------------------------------------------

TEST_F(LifecycleE2E, AllocateFollowsTheIdsGivenAndLogsWhenTheyWereNotPreferred) {
  LogCapture log;
  Config cfg = config();
  cfg.vnpu = VnpuMode::kDynamic;
  up(cfg, 2);
  auto pref = preferred("ascend-Ascend910.sock", chip_ids(0, 7), 2);
  ASSERT_EQ(pref.size(), 2U);
  // Two chips the plugin did not name: the kubelet may choose them.
  std::vector<std::string> other;
  for (const auto& id : chip_ids(0, 7)) {
    if (std::find(pref.begin(), pref.end(), id) == pref.end() && other.size() < 2) other.push_back(id);
  }
  grpc::Status s;
  auto resp = allocate("ascend-Ascend910.sock", {other}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string want = other[0].substr(10) + "," + other[1].substr(10);
  EXPECT_EQ(resp.container_responses(0).envs().at("ASCEND_VISIBLE_DEVICES"), want);
  auto lines = log.lines("not a set this plugin preferred");
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find(other[0] + "," + other[1]), std::string::npos) << lines[0];

  // The preferred set itself: no line.
  allocate("ascend-Ascend910.sock", {pref}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(log.lines("not a set this plugin preferred").size(), 1U);

  // AICores: the plugin prefers cores of one chip; the kubelet hands five of chip 7 instead. The vNPU spec
  // follows them: chip 7, and vir05_1c_16g, the 910B3 template of 5 AICores (reference vnpu-templates).
  std::vector<std::string> cores;
  for (int chip : {6, 7}) {
    for (int k = 0; k < 20; ++k)
      cores.push_back("npu-core-" + std::to_string(chip) + "-" + std::to_string(k));
  }
  auto pc = preferred("ascend-npu-core.sock", cores, 5);
  ASSERT_EQ(pc.size(), 5U);
  std::vector<std::string> given = {"npu-core-7-15", "npu-core-7-16", "npu-core-7-17", "npu-core-7-18",
                                    "npu-core-7-19"};
  ASSERT_NE(pc, given);
  resp = allocate("ascend-npu-core.sock", {given}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.container_responses(0).envs().at("ASCEND_VISIBLE_DEVICES"), "7");
  EXPECT_EQ(resp.container_responses(0).envs().at("ASCEND_VNPU_SPECS"), "vir05_1c_16g");
  EXPECT_EQ(log.lines("huawei.com/npu-core: the kubelet allocates").size(), 1U);
}

// ---- a device query that starts failing (DCMI) -----------------------------------------------------------

// Forwards to the emulator until told to fail, as a DCMI library whose calls start returning errors.
class FlakyQuery final : public npu::DeviceQuery {
 public:
  explicit FlakyQuery(npu::DeviceQuery& real) : real_(real) {}
  void fail(bool f) { failing_ = f; }
  Result<npu::DeviceSnapshot> snapshot() const override {
    if (failing_) return Error(EIO, "dcmi_get_card_list failed: -8005");
    return real_.snapshot();
  }
  std::string host_path(const std::string& p) const override { return real_.host_path(p); }
  Result<npu::Vnpu> create_vnpu(int phy, const std::string& t, std::optional<int> id,
                                const npu::VnpuOwner& owner) override {
    return real_.create_vnpu(phy, t, id, owner);
  }
  Status destroy_vnpu(int id, std::optional<int> phy, const std::optional<npu::VnpuOwner>& holder) override {
    return real_.destroy_vnpu(id, phy, holder);
  }
  Result<std::unique_ptr<npu::Subscription>> subscribe(ChangeCallback cb) const override {
    return real_.subscribe(std::move(cb));
  }

 private:
  npu::DeviceQuery& real_;
  std::atomic<bool> failing_{false};
};

TEST_F(LifecycleE2E, AFailingDeviceQueryMakesEveryResourceUnhealthyUntilItAnswers) {
  load("atlas800t-a2", {240, 241, 242, 243, 244});
  FlakyQuery q(emu);
  Config cfg = config();
  cfg.vnpu = VnpuMode::kDynamic;
  auto p = Plugin::create(q, cfg, nullptr);
  ASSERT_TRUE(p.ok()) << p.error().message();
  Plugin& plugin = **p;
  auto healthy = [&](const ResourceSpec& r) {
    auto l = plugin.list(r).devices;
    return std::count_if(l.begin(), l.end(), [](const DeviceEntry& d) { return is_healthy(d.health); });
  };
  ASSERT_EQ(plugin.resources().size(), 2U);
  EXPECT_EQ(healthy(plugin.resources()[0]), 8);
  EXPECT_EQ(healthy(plugin.resources()[1]), 8 * 20);
  q.fail(true);
  plugin.check_driver();
  EXPECT_NE(plugin.driver_lost().find("dcmi_get_card_list failed"), std::string::npos);
  EXPECT_EQ(healthy(plugin.resources()[0]), 0);
  EXPECT_EQ(healthy(plugin.resources()[1]), 0);
  EXPECT_EQ(plugin.list(plugin.resources()[0]).devices.size(), 8U);  // still listed, as Unhealthy
  EXPECT_FALSE(plugin.allocate(plugin.resources()[0], {{"Ascend910-0"}}).ok());
  q.fail(false);
  plugin.check_driver();
  EXPECT_EQ(plugin.driver_lost(), "");
  EXPECT_EQ(healthy(plugin.resources()[0]), 8);
  EXPECT_TRUE(plugin.allocate(plugin.resources()[0], {{"Ascend910-0"}}).ok());
}

// ---- the plugin's periodic vNPU gc -----------------------------------------------------------------------

// A runc state file for container `id` whose init is process `pid` (runc's field names).
void write_runc_state(const std::string& state_root, const std::string& id, int pid) {
  std::filesystem::create_directories(state_root + "/" + id);
  std::ofstream(state_root + "/" + id + "/state.json")
      << "{\"id\":\"" << id << "\",\"init_process_pid\":" << pid
      << ",\"init_process_start\":" << npu::process_start("/proc", pid) << "}";
}

TEST_F(LifecycleE2E, PeriodicGcDestroysOnlyVnpusWhoseContainerIsGone) {
  Config cfg = config();
  cfg.vnpu = VnpuMode::kDynamic;
  cfg.vnpu_gc_interval = 1s;
  load("atlas800t-a2", {240, 241, 242, 243, 244});
  const std::string runc_root = tmp / "runc";
  write_runc_state(runc_root, "alive", static_cast<int>(::getpid()));  // this test process is its init
  auto host = emu.snapshot();
  ASSERT_TRUE(host.ok());
  const std::string boot = npu::boot_of(*host, "/proc");
  auto owner = [&](const std::string& id) {
    npu::VnpuOwner o;
    o.container_id = id;
    o.state_root = runc_root;
    o.pid = 0;  // no creator left: the runtime's state alone decides
    o.pid_ns = npu::own_pid_ns("/proc");
    o.boot = boot;
    return o;
  };
  // Made through the backend under test, which records the owners (DCMI: in its owner file).
  query = ascend::testing::open_test_query(root);
  ASSERT_TRUE(query);
  auto gone = query->create_vnpu(0, "vir05_1c_16g", std::nullopt, owner("gone"));
  auto alive = query->create_vnpu(1, "vir05_1c_16g", std::nullopt, owner("alive"));
  auto admin = query->create_vnpu(2, "vir05_1c_16g", std::nullopt, {});
  ASSERT_TRUE(gone.ok() && alive.ok() && admin.ok());

  start_kubelet();
  ASSERT_NO_FATAL_FAILURE(run_daemon(cfg));

  EXPECT_TRUE(testing::eventually([&] { return emu.snapshot()->vnpu(gone->id) == nullptr; }))
      << "the orphan was not destroyed";
  auto after = emu.snapshot();
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->vnpu(alive->id), nullptr) << "a vNPU of a live container was destroyed";
  EXPECT_NE(after->vnpu(admin->id), nullptr) << "a static vNPU was destroyed";
}

}  // namespace
}  // namespace ascend::plugin
