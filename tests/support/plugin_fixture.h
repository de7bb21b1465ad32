// The device plugin's end-to-end fixture: ascend-device-plugin's daemon (in this process, on the thread
// `runner`) over an emulated host in a temporary root, read through the backend under test
// (test_query.h), against a fake kubelet (fake_kubelet.h) whose sockets are in the same folder: Registration
// in <tmp>/device-plugins and pod-resources at <tmp>/pod-resources.sock. TearDown stops the daemon and
// expects its run() to have ended well.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ascend/npu/emulator.h"
#include "ascend/plugin/daemon.h"
#include "fake_kubelet.h"
#include "test_dir.h"

namespace ascend::testing {

class PluginFixture : public ::testing::Test {
 protected:
  // The majors of a host that load() is not told otherwise.
  static constexpr npu::DeviceMajors kMajors{240, 241, 242, 243, 244};

  TempDir tmp;
  std::string dir = tmp / "device-plugins";
  std::string root = tmp / "host";
  npu::Emulator emu{root};
  std::unique_ptr<npu::DeviceQuery> query;  // what the plugin reads: the backend under test
  std::unique_ptr<FakeKubelet> kubelet;
  std::unique_ptr<plugin::Daemon> daemon;
  std::thread runner;
  Status run_status;

  // Loads the built-in `profile` at `root` with `majors` (`force`: over a host already loaded); device nodes
  // only as root.
  void load(const char* profile, npu::DeviceMajors majors = kMajors, bool force = true);
  // Starts the fake kubelet, made (with the pod-resources socket) unless the test made its own.
  void start_kubelet();
  // What every test's config starts from: the kubelet's folder, the host root, the pod-resources socket.
  plugin::Config config() const;
  // Opens `query` on the host and runs the daemon over it.
  void start_plugin(const plugin::Config& cfg);
  // Runs the daemon over `query` (already open) on `runner`.
  void run_daemon(const plugin::Config& cfg);
  // The usual start on a loaded host: the kubelet up, the plugin run and registered `registrations` times.
  void serve(const plugin::Config& cfg, int registrations = 1);
  void TearDown() override;

  // Allocate of `ids` (one list a container) on the plugin behind `endpoint`, with a deadline of 5 s.
  v1beta1::AllocateResponse allocate(const std::string& endpoint,
                                     const std::vector<std::vector<std::string>>& ids, grpc::Status* status);
};

}  // namespace ascend::testing
