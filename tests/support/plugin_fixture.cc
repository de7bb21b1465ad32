#include "plugin_fixture.h"

#include <unistd.h>

#include "ascend/npu/profiles.h"
#include "grpc_allocate.h"
#include "test_query.h"

namespace ascend::testing {

using namespace std::chrono_literals;

void PluginFixture::load(const char* profile, npu::DeviceMajors majors, bool force) {
  auto p = npu::builtin_profile(profile);
  ASSERT_TRUE(p.ok());
  npu::LoadOptions opts;
  opts.majors = majors;
  opts.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
  opts.make_nodes = ::geteuid() == 0;
  opts.force = force;
  auto st = emu.load(*p, opts);
  ASSERT_TRUE(st.ok()) << st.error().message();
}

void PluginFixture::start_kubelet() {
  if (!kubelet) kubelet = std::make_unique<FakeKubelet>(dir, tmp / "pod-resources.sock");
  kubelet->start();
}

plugin::Config PluginFixture::config() const {
  plugin::Config c;
  c.kubelet_socket_dir = dir;
  c.host_root = root;
  c.pod_resources_socket = tmp / "pod-resources.sock";
  return c;
}

void PluginFixture::start_plugin(const plugin::Config& cfg) {
  query = open_test_query(root);
  ASSERT_TRUE(query);
  run_daemon(cfg);
}

void PluginFixture::run_daemon(const plugin::Config& cfg) {
  auto d = plugin::Daemon::create(cfg, *query);
  ASSERT_TRUE(d.ok()) << d.error().message();
  daemon = std::move(d).value();
  runner = std::thread([this] { run_status = daemon->run(); });
}

void PluginFixture::serve(const plugin::Config& cfg, int registrations) {
  start_kubelet();
  ASSERT_NO_FATAL_FAILURE(start_plugin(cfg));
  ASSERT_TRUE(kubelet->wait_registrations(registrations, 10s)) << "the plugin did not register";
}

void PluginFixture::TearDown() {
  if (daemon) {
    daemon->stop();
    runner.join();
    EXPECT_TRUE(run_status.ok()) << run_status.error().message();
  }
  daemon.reset();
  kubelet.reset();
}

v1beta1::AllocateResponse PluginFixture::allocate(const std::string& endpoint,
                                                  const std::vector<std::vector<std::string>>& ids,
                                                  grpc::Status* status) {
  return testing::allocate(*kubelet->plugin(endpoint), ids, status, 5s);
}

}  // namespace ascend::testing
