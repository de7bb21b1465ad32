// ascend-device-plugin against a fake kubelet (grpc++ over unix sockets in a temporary folder) and an
// emulated host in a temporary root: registration, options, ListAndWatch, faults and recovery, preferred
// allocation per profile, Allocate in each mode, vNPUs, kubelet restarts, a late kubelet, SIGTERM, /metrics.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "ascend/npu/driver_files.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/daemon.h"
#include "ascend/plugin/plugin.h"
#include "eventually.h"
#include "fake_kubelet.h"
#include "plugin_fixture.h"
#include "test_dir.h"
#include "test_query.h"

extern char** environ;

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::TempDir;
using testing::Watch;

std::map<std::string, std::string> health_of(const v1beta1::ListAndWatchResponse& r) {
  std::map<std::string, std::string> out;
  for (const auto& d : r.devices()) out[d.id()] = d.health();
  return out;
}

auto device_is(const std::string& id, const std::string& health) {
  return [id, health](const v1beta1::ListAndWatchResponse& r) {
    auto h = health_of(r);
    auto it = h.find(id);
    return it != h.end() && it->second == health;
  };
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

class PluginE2E : public testing::PluginFixture {
 protected:
  // The usual start: host loaded, kubelet up, plugin registered.
  void up(const char* profile, const Config& cfg, int registrations = 1) {
    load(profile);
    serve(cfg, registrations);
  }
};

// ---- registration and options ---------------------------------------------------------------------------

TEST_F(PluginE2E, RegistersAfterServingWithVersionEndpointAndResource) {
  up("atlas800t-a2", config());
  auto regs = kubelet->registrations();
  ASSERT_EQ(regs.size(), 1U);
  EXPECT_EQ(regs[0].request.version(), "v1beta1");
  EXPECT_EQ(regs[0].request.endpoint(), "ascend-Ascend910.sock");
  EXPECT_EQ(regs[0].request.resource_name(), "huawei.com/Ascend910");
  EXPECT_TRUE(regs[0].request.options().get_preferred_allocation_available());
  EXPECT_FALSE(regs[0].request.options().pre_start_required());
  // The kubelet's call back during Register was answered: the plugin served before registering and did
  // not wait on the reply.
  EXPECT_TRUE(regs[0].options_ok);
  EXPECT_TRUE(regs[0].options.get_preferred_allocation_available());
  EXPECT_FALSE(regs[0].options.pre_start_required());
  EXPECT_TRUE(exists(dir + "/ascend-Ascend910.sock"));

  // PreStartContainer is not required, and harmless if called.
  auto stub = kubelet->plugin("ascend-Ascend910.sock");
  grpc::ClientContext ctx;
  v1beta1::PreStartContainerRequest req;
  req.add_devices_ids("Ascend910-0");
  v1beta1::PreStartContainerResponse resp;
  EXPECT_TRUE(stub->PreStartContainer(&ctx, req, &resp).ok());
}

TEST_F(PluginE2E, ResourceNameFlagOverridesTheChips) {
  Config cfg = config();
  cfg.resource_name = "example.com/npu";
  up("atlas300i-duo", cfg);
  auto regs = kubelet->registrations();
  EXPECT_EQ(regs[0].request.resource_name(), "example.com/npu");
  EXPECT_EQ(regs[0].request.endpoint(), "ascend-npu.sock");
  auto w = kubelet->watch("ascend-npu.sock");
  v1beta1::ListAndWatchResponse first;
  ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() > 0; }, 5s, &first));
  EXPECT_EQ(first.devices(0).id(), "npu-0");
}

// ---- ListAndWatch ---------------------------------------------------------------------------------------

TEST_F(PluginE2E, ListAndWatchSendsAFullSnapshotWithNuma) {
  up("atlas800t-a2", config());
  auto w = kubelet->watch("ascend-Ascend910.sock");
  v1beta1::ListAndWatchResponse first;
  ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() > 0; }, 5s, &first));
  ASSERT_EQ(first.devices_size(), 8);
  const int numa[] = {6, 6, 4, 4, 0, 0, 2, 2};
  for (int i = 0; i < 8; ++i) {
    const auto& d = first.devices(i);
    EXPECT_EQ(d.id(), "Ascend910-" + std::to_string(i));
    EXPECT_EQ(d.health(), "Healthy");
    ASSERT_EQ(d.topology().nodes_size(), 1);
    EXPECT_EQ(d.topology().nodes(0).id(), numa[i]);
  }
}

TEST_F(PluginE2E, FaultsMakeDevicesUnhealthyAndClearingRecovers) {
  up("atlas800t-a2", config());
  auto w = kubelet->watch("ascend-Ascend910.sock");
  ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s));

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(emu.set_fault(3, 0x80E18402, npu::Health::kCritical).ok());
  ASSERT_TRUE(w->wait_for(device_is("Ascend910-3", "Unhealthy"), 5s));
  const auto took = std::chrono::steady_clock::now() - t0;
  std::printf("critical fault -> Unhealthy in %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));

  // A Warning keeps the device Healthy; an Alarm does not. The warning is committed before the alarm, so the
  // list that shows the alarm also reflects the warning.
  ASSERT_TRUE(emu.set_fault(2, 0x80000001, npu::Health::kWarning).ok());
  ASSERT_TRUE(emu.set_fault(5, 0x84000001, npu::Health::kAlarm).ok());
  v1beta1::ListAndWatchResponse after;
  ASSERT_TRUE(w->wait_for(device_is("Ascend910-5", "Unhealthy"), 5s, &after));
  EXPECT_EQ(health_of(after)["Ascend910-2"], "Healthy");
  EXPECT_EQ(health_of(after)["Ascend910-3"], "Unhealthy");

  ASSERT_TRUE(emu.clear_faults(3).ok());
  ASSERT_TRUE(w->wait_for(device_is("Ascend910-3", "Healthy"), 5s, &after));
  EXPECT_EQ(health_of(after)["Ascend910-5"], "Unhealthy");
  ASSERT_TRUE(emu.clear_faults(5).ok());
  ASSERT_TRUE(w->wait_for(
      [](const auto& r) {
        auto h = health_of(r);
        return std::all_of(h.begin(), h.end(), [](const auto& kv) { return kv.second == "Healthy"; });
      },
      5s));
}

// ListAndWatch streams are write reactors fed by one watcher: a cancelled stream ends and is released
// without disturbing the others, every open stream gets each change, and stopping the plugin ends them.
TEST_F(PluginE2E, ListAndWatchStreamsEndOnCancelAndOpenOnesAllGetChanges) {
  up("atlas800t-a2", config());
  std::vector<std::shared_ptr<Watch>> cancelled;
  for (int i = 0; i < 10; ++i) {
    auto w = kubelet->watch("ascend-Ascend910.sock");
    ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s)) << "stream " << i;
    w->cancel();
    cancelled.push_back(std::move(w));
  }
  auto a = kubelet->watch("ascend-Ascend910.sock");
  auto b = kubelet->watch("ascend-Ascend910.sock");
  ASSERT_TRUE(a->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s));
  ASSERT_TRUE(b->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s));

  ASSERT_TRUE(emu.set_fault(6, 0x80E18402, npu::Health::kCritical).ok());
  EXPECT_TRUE(a->wait_for(device_is("Ascend910-6", "Unhealthy"), 5s));
  EXPECT_TRUE(b->wait_for(device_is("Ascend910-6", "Unhealthy"), 5s));
  ASSERT_TRUE(emu.clear_faults(6).ok());
  EXPECT_TRUE(a->wait_for(device_is("Ascend910-6", "Healthy"), 5s));
  EXPECT_TRUE(b->wait_for(device_is("Ascend910-6", "Healthy"), 5s));
  for (const auto& w : cancelled) {
    EXPECT_TRUE(testing::eventually([&] { return w->ended(); }));
    EXPECT_EQ(w->received().size(), 1u) << "a cancelled stream got a change";
  }

  daemon->stop();
  runner.join();
  EXPECT_TRUE(run_status.ok()) << run_status.error().message();
  daemon.reset();
  EXPECT_FALSE(a->wait_for([](const auto&) { return true; }, 2s)) << "a list after the plugin stopped";
  EXPECT_TRUE(testing::eventually([&] { return a->ended() && b->ended(); }));
  // An unchanged state sends nothing more: one list per change (the first, the fault, its clearing), none in
  // between and none at the stop.
  EXPECT_EQ(a->received().size(), 3u);
}

int run_cmd(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(PluginE2E, NpuSimFaultCommandIsSeen) {
  up("atlas800-9000", config());
  auto w = kubelet->watch("ascend-Ascend910.sock");
  const std::string sim = std::string(ASCEND_BIN_DIR) + "/npu-sim";
  ASSERT_EQ(run_cmd({sim, "--root", root, "fault", "set", "--device", "6", "--code", "0x80E18402",
                     "--severity", "critical"}),
            0);
  ASSERT_TRUE(w->wait_for(device_is("Ascend910-6", "Unhealthy"), 5s));
  ASSERT_EQ(run_cmd({sim, "--root", root, "fault", "clear", "--device", "6"}), 0);
  ASSERT_TRUE(w->wait_for(device_is("Ascend910-6", "Healthy"), 5s));
}

// ---- GetPreferredAllocation -----------------------------------------------------------------------------

struct PrefRow {
  const char* profile;
  std::vector<int> available;
  int size;
  std::vector<int> want;  // empty: an error
};

class PreferredE2E : public PluginE2E, public ::testing::WithParamInterface<const char*> {};

TEST_P(PreferredE2E, AnswersTheAllocatorsChoice) {
  const std::string name = GetParam();
  const PrefRow rows[] = {
      {"atlas800-9000", {0, 1, 2, 4, 5}, 2, {4, 5}},
      {"atlas800-9000", {0, 4, 5, 6}, 1, {0}},
      {"atlas800-9000", {0, 1, 2, 4, 5, 6, 7}, 4, {4, 5, 6, 7}},
      {"atlas800-9000", {0, 1, 2, 3, 4, 5, 6, 7}, 3, {}},
      {"atlas800t-a2", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"atlas800t-a3", {1, 2, 3, 5}, 2, {2, 3}},
      {"atlas800t-a3",
       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
       16,
       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
      {"atlas300i-duo", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
  };
  up(name.c_str(), config());
  const std::string prefix = name == "atlas300i-duo" ? "Ascend310P-" : "Ascend910-";
  const std::string endpoint = name == "atlas300i-duo" ? "ascend-Ascend310P.sock" : "ascend-Ascend910.sock";
  auto stub = kubelet->plugin(endpoint);
  int rows_run = 0;
  for (const auto& row : rows) {
    if (name != row.profile) continue;
    ++rows_run;
    v1beta1::PreferredAllocationRequest req;
    auto* cr = req.add_container_requests();
    for (int p : row.available) cr->add_available_deviceids(prefix + std::to_string(p));
    cr->set_allocation_size(row.size);
    grpc::ClientContext ctx;
    v1beta1::PreferredAllocationResponse resp;
    grpc::Status s = stub->GetPreferredAllocation(&ctx, req, &resp);
    if (row.want.empty()) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.container_responses_size(), 1);
    std::vector<std::string> got(resp.container_responses(0).deviceids().begin(),
                                 resp.container_responses(0).deviceids().end());
    std::vector<std::string> want;
    for (int p : row.want) want.push_back(prefix + std::to_string(p));
    EXPECT_EQ(got, want) << name << " size " << row.size;
  }
  EXPECT_GT(rows_run, 0);
}

INSTANTIATE_TEST_SUITE_P(Profiles, PreferredE2E,
                         ::testing::Values("atlas800-9000", "atlas800t-a2", "atlas800t-a3", "atlas300i-duo"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// ---- Allocate -------------------------------------------------------------------------------------------

TEST_F(PluginE2E, AllocateRuntimeMode) {
  up("atlas800t-a2", config());
  grpc::Status s;
  auto resp = allocate("ascend-Ascend910.sock", {{"Ascend910-4", "Ascend910-5"}, {"Ascend910-0"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 2);
  const auto& c0 = resp.container_responses(0);
  ASSERT_EQ(c0.envs().size(), 1U);
  EXPECT_EQ(c0.envs().at("ASCEND_VISIBLE_DEVICES"), "4,5");
  ASSERT_EQ(c0.mounts_size(), 2);
  EXPECT_EQ(c0.mounts(0).container_path(), "/var/run/ascend-container-devices/4");
  EXPECT_EQ(c0.mounts(0).host_path(), "/dev/null");
  EXPECT_TRUE(c0.mounts(0).read_only());
  EXPECT_EQ(c0.mounts(1).container_path(), "/var/run/ascend-container-devices/5");
  EXPECT_EQ(c0.devices_size(), 0);
  EXPECT_EQ(resp.container_responses(1).envs().at("ASCEND_VISIBLE_DEVICES"), "0");
}

TEST_F(PluginE2E, AllocateDeviceSpecMode) {
  Config cfg = config();
  cfg.allocate_mode = AllocateMode::kDeviceSpec;
  up("atlas800t-a2", cfg);
  grpc::Status s;
  auto resp = allocate("ascend-Ascend910.sock", {{"Ascend910-1"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto& c = resp.container_responses(0);
  EXPECT_EQ(c.envs().size(), 0U);
  std::vector<std::pair<std::string, std::string>> devs;
  for (const auto& d : c.devices()) {
    devs.emplace_back(d.container_path(), d.host_path());
    EXPECT_EQ(d.permissions(), "rw");
  }
  EXPECT_EQ(devs, (std::vector<std::pair<std::string, std::string>>{
                      {"/dev/davinci1", root + "/dev/davinci1"},
                      {"/dev/davinci_manager", root + "/dev/davinci_manager"},
                      {"/dev/devmm_svm", root + "/dev/devmm_svm"},
                      {"/dev/hisi_hdc", root + "/dev/hisi_hdc"}}));
  const auto files = npu::driver_files();
  ASSERT_EQ(c.mounts_size(), static_cast<int>(files.size()));
  for (int i = 0; i < c.mounts_size(); ++i) {
    EXPECT_EQ(c.mounts(i).container_path(), files[static_cast<std::size_t>(i)]);
    EXPECT_EQ(c.mounts(i).host_path(), root + files[static_cast<std::size_t>(i)]);
    EXPECT_TRUE(c.mounts(i).read_only());
    // The driver files the host path names exist in the emulated host.
    EXPECT_TRUE(exists(c.mounts(i).host_path())) << c.mounts(i).host_path();
  }
}

TEST_F(PluginE2E, AllocateCdiMode) {
  Config cfg = config();
  cfg.allocate_mode = AllocateMode::kCdi;
  up("atlas800t-a2", cfg);
  grpc::Status s;
  auto resp = allocate("ascend-Ascend910.sock", {{"Ascend910-6", "Ascend910-2"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto& c = resp.container_responses(0);
  ASSERT_EQ(c.cdi_devices_size(), 2);
  EXPECT_EQ(c.cdi_devices(0).name(), "huawei.com/npu=2");
  EXPECT_EQ(c.cdi_devices(1).name(), "huawei.com/npu=6");
  EXPECT_EQ(c.envs().size(), 0U);
  EXPECT_EQ(c.devices_size(), 0);
}

TEST_F(PluginE2E, AllocateErrorsNameTheIds) {
  up("atlas800t-a2", config());
  ASSERT_TRUE(emu.set_fault(7, 0x80E18402, npu::Health::kCritical).ok());
  auto w = kubelet->watch("ascend-Ascend910.sock");
  ASSERT_TRUE(w->wait_for(device_is("Ascend910-7", "Unhealthy"), 5s));
  grpc::Status s;
  allocate("ascend-Ascend910.sock", {{"Ascend910-0", "Ascend910-12"}}, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("unknown device ids Ascend910-12"), std::string::npos)
      << s.error_message();
  allocate("ascend-Ascend910.sock", {{"Ascend910-7"}}, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("unhealthy devices Ascend910-7 (Critical)"), std::string::npos)
      << s.error_message();
  allocate("ascend-Ascend910.sock", {}, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// ---- vNPU -----------------------------------------------------------------------------------------------

TEST_F(PluginE2E, StaticVnpusAreAdvertisedAsTheirOwnResources) {
  load("atlas800t-a2");
  // vNPUs made before the plugin starts (npu-smi set -t create-vnpu does this; without root no device
  // node can be made, so the state is edited directly).
  auto add = [&](int phy, const char* tmpl) {
    ASSERT_TRUE(emu.update([&](npu::HostState& s) -> Status {
                     ASCEND_ASSIGN(auto v, npu::plan_vnpu(s, phy, tmpl, std::nullopt), "");
                     s.vnpus.push_back(v);
                     return {};
                   })
                    .ok());
  };
  add(0, "vir10_3c_32g");
  start_kubelet();
  Config cfg = config();
  cfg.vnpu = VnpuMode::kStatic;
  start_plugin(cfg);
  ASSERT_TRUE(kubelet->wait_registrations(3, 10s));
  std::set<std::string> names;
  for (const auto& r : kubelet->registrations()) names.insert(r.request.resource_name());
  EXPECT_EQ(names, (std::set<std::string>{"huawei.com/Ascend910", "huawei.com/Ascend910-10c.3cpu.32g",
                                          "huawei.com/Ascend910-5c.1cpu.16g"}));

  auto chips = kubelet->watch("ascend-Ascend910.sock");
  auto v10 = kubelet->watch("ascend-Ascend910-10c.3cpu.32g.sock");
  auto v5 = kubelet->watch("ascend-Ascend910-5c.1cpu.16g.sock");
  v1beta1::ListAndWatchResponse r;
  ASSERT_TRUE(chips->wait_for([](const auto& x) { return x.devices_size() > 0; }, 5s, &r));
  EXPECT_EQ(r.devices_size(), 7) << "the chip that holds a vNPU is not advertised whole";
  EXPECT_EQ(health_of(r).count("Ascend910-0"), 0U);
  ASSERT_TRUE(v10->wait_for([](const auto& x) { return x.devices_size() == 1; }, 5s, &r));
  EXPECT_EQ(r.devices(0).id(), "Ascend910-10c.3cpu.32g-100-0");

  // A vNPU made while the plugin runs shows up, and its chip leaves the whole-chip list.
  add(3, "vir05_1c_16g");
  ASSERT_TRUE(v5->wait_for([](const auto& x) { return x.devices_size() == 1; }, 5s, &r));
  EXPECT_EQ(r.devices(0).id(), "Ascend910-5c.1cpu.16g-148-3");
  ASSERT_TRUE(chips->wait_for([](const auto& x) { return x.devices_size() == 6; }, 5s));

  grpc::Status s;
  auto resp = allocate("ascend-Ascend910-5c.1cpu.16g.sock", {{"Ascend910-5c.1cpu.16g-148-3"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.container_responses(0).envs().at("ASCEND_VISIBLE_DEVICES"), "148");
  EXPECT_EQ(resp.container_responses(0).envs().at("ASCEND_RUNTIME_OPTIONS"), "VIRTUAL");
  allocate("ascend-Ascend910.sock", {{"Ascend910-3"}}, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("Ascend910-3 (holds vNPUs)"), std::string::npos) << s.error_message();
}

TEST_F(PluginE2E, DynamicVnpuAdvertisesCoresAndNeverHandsAChipOutTwice) {
  Config cfg = config();
  cfg.vnpu = VnpuMode::kDynamic;
  up("atlas800t-a2", cfg, 2);
  std::set<std::string> names;
  for (const auto& r : kubelet->registrations()) names.insert(r.request.resource_name());
  EXPECT_EQ(names, (std::set<std::string>{"huawei.com/Ascend910", "huawei.com/npu-core"}));
  auto chips = kubelet->watch("ascend-Ascend910.sock");
  auto cores = kubelet->watch("ascend-npu-core.sock");
  ASSERT_TRUE(cores->wait_for([](const auto& x) { return x.devices_size() == 8 * 20; }, 5s));

  grpc::Status s;
  auto resp = allocate("ascend-npu-core.sock", {{"npu-core-2-0", "npu-core-2-1", "npu-core-2-2"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto& envs = resp.container_responses(0).envs();
  EXPECT_EQ(envs.at("ASCEND_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(envs.at("ASCEND_VNPU_SPECS"), "vir05_1c_16g");
  // Chip 2 leaves the whole-chip list; 2 more of its tokens are withheld (the template has 5 AICores).
  ASSERT_TRUE(chips->wait_for([](const auto& x) { return x.devices_size() == 7; }, 5s));
  ASSERT_TRUE(cores->wait_for([](const auto& x) { return x.devices_size() == 8 * 20 - 2; }, 5s));
  allocate("ascend-Ascend910.sock", {{"Ascend910-2"}}, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();

  // A whole chip handed out takes its cores off the list.
  allocate("ascend-Ascend910.sock", {{"Ascend910-5"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(cores->wait_for([](const auto& x) { return x.devices_size() == 8 * 20 - 2 - 20; }, 5s));
}

TEST_F(PluginE2E, DynamicPromisesEndWhenThePodResourcesNoLongerListThem) {
  Config cfg = config();
  cfg.vnpu = VnpuMode::kDynamic;
  cfg.reconcile_every = 50ms;
  cfg.promise_grace = 300ms;
  up("atlas800t-a2", cfg, 2);
  auto chips = kubelet->watch("ascend-Ascend910.sock");
  ASSERT_TRUE(chips->wait_for([](const auto& x) { return x.devices_size() == 8; }, 5s));
  const std::vector<std::string> tokens = {"npu-core-6-0", "npu-core-6-1"};
  kubelet->set_in_use({{"huawei.com/npu-core", {tokens.begin(), tokens.end()}}});
  grpc::Status s;
  allocate("ascend-npu-core.sock", {tokens}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(chips->wait_for([](const auto& x) { return x.devices_size() == 7; }, 5s));
  // While the kubelet lists the tokens, the promise holds past its grace period: the grace (real time, the
  // ledger's clock) passes, then two more reconcile passes ask the kubelet.
  std::this_thread::sleep_for(cfg.promise_grace);
  const int lists = kubelet->pod_resources_lists();
  ASSERT_TRUE(testing::eventually([&] { return kubelet->pod_resources_lists() >= lists + 2; }));
  EXPECT_EQ(daemon->plugin().ledger().promises().size(), 1U);
  // The pod is gone: the promise ends and chip 6 is advertised whole again.
  kubelet->set_in_use({});
  ASSERT_TRUE(chips->wait_for([](const auto& x) { return x.devices_size() == 8; }, 5s));
  EXPECT_TRUE(daemon->plugin().ledger().promises().empty());
}

// ---- kubelet restarts -----------------------------------------------------------------------------------

// How long a re-registration takes is printed, not asserted (a busy machine would fail a bound). One restart
// can make the plugin serve again more than once (the kubelet deletes every socket while the plugin makes its
// own again), so before each restart the test waits until the plugin serves a whole list on a new stream.
TEST_F(PluginE2E, KubeletRestartTwentyTimesReRegistersEachTime) {
  up("atlas800t-a2", config());
  auto serving = [&](std::shared_ptr<Watch>* out) {
    return testing::eventually(
        [&] {
          auto w = kubelet->watch("ascend-Ascend910.sock");
          if (!w->wait_for([](const auto& r) { return r.devices_size() == 8; }, 1s)) return false;
          *out = std::move(w);
          return true;
        },
        testing::kEventually, 50ms);
  };
  std::chrono::milliseconds worst{0};
  for (int i = 0; i < 20; ++i) {
    std::shared_ptr<Watch> w;
    ASSERT_TRUE(serving(&w)) << "restart " << i;
    const int before = kubelet->registration_count();
    const auto t0 = std::chrono::steady_clock::now();
    kubelet->restart();  // closes the stream, deletes every socket, serves a new kubelet.sock
    ASSERT_TRUE(kubelet->wait_registrations(before + 1, testing::kEventually)) << "restart " << i;
    auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(kubelet->registrations().back().at - t0);
    worst = std::max(worst, took);
    EXPECT_TRUE(testing::eventually([&] { return w->ended(); })) << "restart " << i;
    EXPECT_TRUE(testing::eventually([&] { return exists(dir + "/ascend-Ascend910.sock"); }))
        << "restart " << i;
    EXPECT_TRUE(kubelet->registrations().back().options_ok);
  }
  std::printf("worst re-registration after a kubelet restart: %lld ms\n",
              static_cast<long long>(worst.count()));
  std::shared_ptr<Watch> w;
  ASSERT_TRUE(serving(&w));
}

TEST_F(PluginE2E, PluginStartedBeforeKubeletWaitsThenRegisters) {
  load("atlas800t-a2");
  start_plugin(config());
  ASSERT_TRUE(testing::eventually([&] { return exists(dir + "/ascend-Ascend910.sock"); }))
      << "the plugin serves before any kubelet exists";
  std::this_thread::sleep_for(300ms);  // the plugin waits a while with no kubelet
  kubelet = std::make_unique<FakeKubelet>(dir);
  kubelet->start();
  ASSERT_TRUE(kubelet->wait_registrations(1, testing::kEventually));
}

// ---- the sockets' mode ----------------------------------------------------------------------------------

// Every entry of the device-plugins folder but the kubelet's: name -> mode (file type bits included).
std::map<std::string, mode_t> plugin_entries(const std::string& dir) {
  std::map<std::string, mode_t> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename();
    if (name == "kubelet.sock") continue;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) == 0) out[name] = st.st_mode;
  }
  return out;
}

class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;

 private:
  mode_t old_;
};

// Whoever can connect to a plugin socket can Allocate: only the kubelet (root) may, whatever the umask.
TEST_F(PluginE2E, SocketsAreMode0600UnderUmask000AndStaySoAfterAKubeletRestart) {
  Umask open_umask(0);
  Config cfg = config();
  cfg.vnpu = VnpuMode::kDynamic;  // two resources, two sockets
  up("atlas800t-a2", cfg, 2);
  const mode_t socket_0600 = S_IFSOCK | S_IRUSR | S_IWUSR;
  const std::map<std::string, mode_t> want = {{"ascend-Ascend910.sock", socket_0600},
                                              {"ascend-npu-core.sock", socket_0600}};
  EXPECT_EQ(plugin_entries(dir), want) << "0600 sockets and nothing else (no private folder left behind)";
  const int before = kubelet->registration_count();
  kubelet->restart();
  ASSERT_TRUE(kubelet->wait_registrations(before + 2, 5s));
  EXPECT_EQ(plugin_entries(dir), want);
  grpc::Status s;
  allocate("ascend-Ascend910.sock", {{"Ascend910-0"}}, &s);
  EXPECT_TRUE(s.ok()) << "the kubelet (root, the owner) still connects: " << s.error_message();
}

// ---- the binary: SIGTERM, --config, --help --------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  pid_t pid = -1;
  ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

TEST_F(PluginE2E, BinaryServesFromAConfigFileAndDeregistersOnSigterm) {
  load("atlas800t-a2");
  start_kubelet();
  {
    std::ofstream f(tmp / "plugin.yaml");
    f << "kubelet-socket-dir: " << dir << "\nhost-root: " << root
      << "\nbackend: " << ascend::testing::test_backend() << "\nallocate-mode: cdi\nlog-level: debug\n";
  }
  const std::string bin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
  pid_t pid = spawn({bin, "--config", tmp / "plugin.yaml"}, tmp / "plugin.log");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(kubelet->wait_registrations(1, 10s)) << "see " << (tmp / "plugin.log");
  grpc::Status s;
  auto resp = allocate("ascend-Ascend910.sock", {{"Ascend910-1"}}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses(0).cdi_devices_size(), 1);
  EXPECT_EQ(resp.container_responses(0).cdi_devices(0).name(), "huawei.com/npu=1");

  auto w = kubelet->watch("ascend-Ascend910.sock");
  ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(pid, 10s), 0);
  EXPECT_FALSE(exists(dir + "/ascend-Ascend910.sock")) << "the socket is removed on SIGTERM";
  EXPECT_TRUE(exists(dir + "/kubelet.sock")) << "the kubelet's socket is left alone";
  EXPECT_TRUE(testing::eventually([&] { return w->ended(); })) << "the ListAndWatch stream ends";
}

TEST_F(PluginE2E, BinaryUnderUmask000ServesOnAMode0600Socket) {
  load("atlas800t-a2");
  start_kubelet();
  const std::string bin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
  pid_t pid = -1;
  {
    Umask open_umask(0);  // the child inherits it
    pid = spawn({bin, "--host-root", root, "--kubelet-socket-dir", dir, "--pod-resources-socket", "",
                 "--backend", ascend::testing::test_backend()},
                tmp / "plugin.log");
  }
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(kubelet->wait_registrations(1, 10s)) << "see " << (tmp / "plugin.log");
  EXPECT_EQ(plugin_entries(dir),
            (std::map<std::string, mode_t>{{"ascend-Ascend910.sock", S_IFSOCK | S_IRUSR | S_IWUSR}}));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(pid, 10s), 0);
}

TEST_F(PluginE2E, BinaryHelpAndUsageErrors) {
  const std::string bin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
  EXPECT_EQ(wait_exit(spawn({bin, "--help"}, tmp / "help.log"), 10s), 0);
  EXPECT_EQ(wait_exit(spawn({bin, "--no-such-flag"}, tmp / "bad.log"), 10s), 2);
  // A bad value is bad usage, on the command line or in the --config file.
  EXPECT_EQ(wait_exit(spawn({bin, "--allocate-mode", "magic", "--host-root", root}, tmp / "mode.log"), 10s),
            2);
  std::ifstream f(tmp / "mode.log");
  std::string line;
  std::getline(f, line);
  EXPECT_NE(line.find("unknown allocate mode 'magic'"), std::string::npos) << line;
  std::ofstream(tmp / "bad.yaml") << "host-root: " << root << "\nallocate_mode: cdi\n";
  EXPECT_EQ(wait_exit(spawn({bin, "--config", tmp / "bad.yaml"}, tmp / "key.log"), 10s), 2);
  std::ifstream k(tmp / "key.log");
  std::getline(k, line);
  EXPECT_NE(line.find("bad.yaml: unknown key 'allocate_mode' (valid: allocate-mode,"), std::string::npos)
      << line;
  // No emulated host at the root: one clear line, exit 1.
  EXPECT_EQ(
      wait_exit(spawn({bin, "--host-root", tmp / "nothing", "--kubelet-socket-dir", dir}, tmp / "nohost.log"),
                10s),
      1);
  std::ifstream g(tmp / "nohost.log");
  std::getline(g, line);
  EXPECT_NE(line.find("no emulated host is loaded"), std::string::npos) << line;
}

// ---- /metrics -------------------------------------------------------------------------------------------

std::string scrape(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return "";
  return r->body;
}

bool has_line(const std::string& body, const std::string& line) {
  return body.find("\n" + line + "\n") != std::string::npos || body.rfind(line + "\n", 0) == 0;
}

TEST_F(PluginE2E, MetricsAreScrapedOverHttp) {
  Config cfg = config();
  cfg.metrics_addr = "127.0.0.1:0";
  up("atlas800t-a2", cfg);
  const int port = daemon->metrics_port();
  ASSERT_GT(port, 0);
  std::string body = scrape(port);
  ASSERT_FALSE(body.empty());
  EXPECT_TRUE(has_line(body, "ascend_npu_healthy{device=\"0\"} 1")) << body;
  EXPECT_TRUE(has_line(body, "ascend_npu_aicore_count{device=\"0\"} 20")) << body;
  EXPECT_TRUE(has_line(body, "ascend_npu_temperature_celsius{device=\"0\"} 43")) << body;
  EXPECT_TRUE(has_line(body, "ascend_npu_hbm_total_bytes{device=\"7\"} 68719476736")) << body;

  ASSERT_TRUE(emu.set_fault(1, 0x80E18402, npu::Health::kCritical).ok());
  EXPECT_TRUE(
      testing::eventually([&] { return has_line(scrape(port), "ascend_npu_healthy{device=\"1\"} 0"); },
                          testing::kEventually, 20ms));
  body = scrape(port);
  EXPECT_TRUE(has_line(body, "ascend_npu_health_level{device=\"1\"} 3")) << body;

  grpc::Status s;
  allocate("ascend-Ascend910.sock", {{"Ascend910-0"}}, &s);
  ASSERT_TRUE(s.ok());
  allocate("ascend-Ascend910.sock", {{"Ascend910-1"}}, &s);
  ASSERT_FALSE(s.ok());
  body = scrape(port);
  EXPECT_TRUE(
      has_line(body, "ascend_device_plugin_allocate_requests_total{resource=\"huawei.com/Ascend910\"} 2"))
      << body;
  EXPECT_TRUE(
      has_line(body, "ascend_device_plugin_allocate_errors_total{resource=\"huawei.com/Ascend910\"} 1"))
      << body;
  EXPECT_TRUE(has_line(
      body, "ascend_device_plugin_allocate_duration_seconds_count{resource=\"huawei.com/Ascend910\"} 2"))
      << body;
}

}  // namespace
}  // namespace ascend::plugin
