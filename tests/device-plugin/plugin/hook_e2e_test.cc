// End to end, kubelet to container: the fake kubelet asks the plugin (runtime mode) for chips, and the
// Allocate answer (its envs and its marker mounts, as the kubelet would put them in the container's spec)
// goes to a real runc container through ascend-docker-runtime and its hook. The container must hold
// exactly the chips the plugin answered, and npu-smi inside it must list exactly those.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <thread>

#include "ascend/npu/emulator.h"
#include "ascend/plugin/daemon.h"
#include "fake_kubelet.h"
#include "grpc_allocate.h"
#include "support.h"
#include "test_query.h"

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
namespace ht = ascend::hook::testing;

using ht::smi_ids;

class PluginHookE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (runc, mounts, device nodes)";
    if (!ht::have_program("runc")) FAIL() << "runc is not installed (scripts/deps installs it)";
    if (::access("/bin/busybox", X_OK) != 0)
      FAIL() << "busybox-static is not installed (scripts/deps installs it)";
    host_ = std::make_unique<ht::EmulatedHost>(tmp_ / "host");
    ASSERT_TRUE(host_->ok()) << host_->error();
    hook_config_ = ht::write_hook_config(tmp_.path(), tmp_ / "host");
    kubelet_ = std::make_unique<testing::FakeKubelet>(tmp_ / "device-plugins");
    kubelet_->start();
  }

  void start_plugin(VnpuMode vnpu, int registrations) {
    Config cfg;
    cfg.kubelet_socket_dir = tmp_ / "device-plugins";
    cfg.host_root = tmp_ / "host";
    cfg.vnpu = vnpu;
    cfg.pod_resources_socket.clear();
    query_ = ascend::testing::open_test_query(tmp_ / "host");
    ASSERT_TRUE(query_);
    auto d = Daemon::create(cfg, *query_);
    ASSERT_TRUE(d.ok()) << d.error().message();
    daemon_ = std::move(d).value();
    runner_ = std::thread([this] { (void)daemon_->run(); });
    ASSERT_TRUE(kubelet_->wait_registrations(registrations, 10s));
  }

  void TearDown() override {
    if (daemon_) {
      daemon_->stop();
      runner_.join();
    }
  }

  // What the kubelet does with one container's Allocate answer: env entries and bind mounts in the spec.
  std::unique_ptr<ht::Bundle> bundle_for(const v1beta1::ContainerAllocateResponse& a) {
    auto b = std::make_unique<ht::Bundle>(tmp_ / ("bundle" + std::to_string(bundles_++)));
    ht::spit(b->rootfs() + "/probe.sh", ht::probe_script());
    b->set_args({"/bin/sh", "/probe.sh"});
    for (const auto& [k, v] : a.envs()) b->add_env(k + "=" + v);
    for (const auto& m : a.mounts()) {
      nlohmann::json opts = nlohmann::json::array({"rbind"});
      if (m.read_only()) opts.push_back("ro");
      b->spec()["mounts"].push_back({{"destination", m.container_path()},
                                     {"type", "bind"},
                                     {"source", m.host_path()},
                                     {"options", opts}});
    }
    b->save();
    return b;
  }

  v1beta1::ContainerAllocateResponse allocate(const std::string& endpoint,
                                              const std::vector<std::string>& ids) {
    grpc::Status s;
    auto resp = ascend::testing::allocate(*kubelet_->plugin(endpoint), {ids}, &s);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return ascend::testing::first_container(resp);
  }

  std::map<std::string, std::string> expected_nodes(const std::vector<int>& ids, bool is_virtual) const {
    auto s = npu::Emulator(tmp_ / "host").read_state().value();
    auto text = [](int maj, int min) { return "c " + std::to_string(maj) + ":" + std::to_string(min); };
    std::map<std::string, std::string> want;
    for (int id : ids) {
      want["/dev/davinci" + std::to_string(id)] = text(is_virtual ? s.majors.vdavinci : s.majors.davinci, id);
    }
    want["/dev/davinci_manager"] = text(s.majors.manager, 0);
    want["/dev/devmm_svm"] = text(s.majors.svm, 0);
    want["/dev/hisi_hdc"] = text(s.majors.hdc, 0);
    return want;
  }

  std::vector<std::string> shim() const {
    return {ht::bin("ascend-docker-runtime"), "--config", hook_config_};
  }

  ht::TempDir tmp_{"plugin-e2e"};
  std::unique_ptr<ht::EmulatedHost> host_;
  npu::Emulator emu_{tmp_ / "host"};
  std::unique_ptr<npu::DeviceQuery> query_;  // what the plugin reads: the backend under test
  std::string hook_config_;
  std::unique_ptr<testing::FakeKubelet> kubelet_;
  std::unique_ptr<Daemon> daemon_;
  std::thread runner_;
  ht::Runner runc_{tmp_ / "runc-state"};
  int bundles_ = 0;
};

TEST_F(PluginHookE2E, RuntimeModeAllocateGivesTheContainerExactlyThoseChips) {
  start_plugin(VnpuMode::kOff, 1);
  // The kubelet's order: the preferred allocation, then Allocate of that choice.
  auto stub = kubelet_->plugin("ascend-Ascend910.sock");
  v1beta1::PreferredAllocationRequest preq;
  auto* pr = preq.add_container_requests();
  for (int i : {1, 2, 3, 5, 6}) pr->add_available_deviceids("Ascend910-" + std::to_string(i));
  pr->set_allocation_size(2);
  grpc::ClientContext pctx;
  v1beta1::PreferredAllocationResponse presp;
  ASSERT_TRUE(stub->GetPreferredAllocation(&pctx, preq, &presp).ok());
  std::vector<std::string> ids(presp.container_responses(0).deviceids().begin(),
                               presp.container_responses(0).deviceids().end());
  ASSERT_EQ(ids.size(), 2U);
  std::vector<int> phys;
  for (const auto& id : ids) phys.push_back(std::stoi(id.substr(std::string("Ascend910-").size())));

  auto a = allocate("ascend-Ascend910.sock", ids);
  auto b = bundle_for(a);
  auto o = runc_.run(shim(), *b, ht::unique_id("plugin"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto p = ht::parse_probe(o.out);
  ASSERT_TRUE(p.started) << o.out << o.err;
  EXPECT_EQ(p.devices, expected_nodes(phys, false));
  EXPECT_EQ(smi_ids(p.smi), std::set<int>(phys.begin(), phys.end())) << o.out;
  for (int id : phys) {
    EXPECT_EQ(p.mounts.count("/var/run/ascend-container-devices/" + std::to_string(id)), 1U)
        << "the kubelet's marker mount for device " << id;
  }
}

TEST_F(PluginHookE2E, DynamicVnpuAllocateMakesAVnpuOnThatChipForTheContainer) {
  start_plugin(VnpuMode::kDynamic, 2);
  auto a = allocate("ascend-npu-core.sock", {"npu-core-4-0", "npu-core-4-1", "npu-core-4-2", "npu-core-4-3"});
  ASSERT_EQ(a.envs().at("ASCEND_VISIBLE_DEVICES"), "4");
  ASSERT_EQ(a.envs().at("ASCEND_VNPU_SPECS"), "vir05_1c_16g");
  auto b = bundle_for(a);
  auto o = runc_.run(shim(), *b, ht::unique_id("dyn"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto p = ht::parse_probe(o.out);
  ASSERT_TRUE(p.started) << o.out << o.err;
  int vid = -1;
  for (const auto& e : p.env) {
    if (e.rfind("ASCEND_VISIBLE_DEVICES=", 0) == 0) vid = std::stoi(e.substr(23));
  }
  EXPECT_GE(vid, 100 + 16 * 4);
  EXPECT_LE(vid, 100 + 16 * 4 + 15);
  EXPECT_EQ(p.devices, expected_nodes({vid}, true));
  // The chip's marker names the vNPU the container holds (the shim renames it), so the hook agrees.
  EXPECT_EQ(p.mounts.count("/var/run/ascend-container-devices/" + std::to_string(vid)), 1U) << o.out;
  EXPECT_EQ(smi_ids(p.smi), std::set<int>{4}) << o.out;
  EXPECT_TRUE(emu_.snapshot()->vnpus.empty()) << "the vNPU is reclaimed when the container is gone";
}

}  // namespace
}  // namespace ascend::plugin
