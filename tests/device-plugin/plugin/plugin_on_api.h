// Test support shared by the plugin's API-server tests (kube_publish_test, faults_test): an emulated Atlas
// 800T A2 host, the plugin over it (watching its devices), the API server stand-in and a client of it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "ascend/common/kube_client.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/plugin.h"
#include "fake_apiserver.h"
#include "test_dir.h"
#include "test_query.h"

namespace ascend::plugin::api_test {

inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

class PluginOnApi : public ::testing::Test {
 protected:
  ascend::testing::TempDir tmp;
  std::string root = tmp / "host";
  npu::Emulator emu{root};
  std::unique_ptr<npu::DeviceQuery> query;
  std::unique_ptr<Plugin> plugin;
  ascend::testing::FakeApiServer api;
  std::unique_ptr<kube::Client> client;

  // `health_interval` zero: the plugin's default.
  void start_plugin(std::chrono::milliseconds health_interval = {}) {
    auto p = npu::builtin_profile("atlas800t-a2");
    ASSERT_TRUE(p.ok());
    npu::LoadOptions opts;
    opts.majors = npu::DeviceMajors{240, 241, 242, 243, 244};
    opts.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
    opts.make_nodes = ::geteuid() == 0;
    opts.force = true;
    ASSERT_TRUE(emu.load(*p, opts).ok());
    query = ascend::testing::open_test_query(root);
    ASSERT_TRUE(query);
    Config c;
    c.kubelet_socket_dir = tmp / "device-plugins";
    c.host_root = root;
    c.pod_resources_socket = "";
    c.vnpu_gc_interval = std::chrono::seconds(0);
    if (health_interval.count() > 0) c.health_interval = health_interval;
    auto made = Plugin::create(*query, c, nullptr);
    ASSERT_TRUE(made.ok()) << made.error().message();
    plugin = std::move(made).value();
    ASSERT_TRUE(plugin->watch().ok());
    auto cfg = kube::url_config(api.url(), "", "");
    ASSERT_TRUE(cfg.ok()) << cfg.error().message();
    client = std::make_unique<kube::Client>(*cfg);
  }
};

}  // namespace ascend::plugin::api_test
