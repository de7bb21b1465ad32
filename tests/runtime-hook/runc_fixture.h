// The fixture of the end-to-end tests with real runc (runc_test.cc, attack_test.cc): an emulated host, a
// config for the shim in the parameter's injection mode, busybox bundles running the probe, and the exact
// nodes and mounts a served container must hold. Root only (SetUp skips otherwise). Not thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ascend/npu/emulator.h"
#include "support.h"

namespace ascend::hook {

using namespace testing;  // NOLINT(google-build-using-namespace): the test support helpers

inline constexpr const char* kBaseMounts[] = {"/usr/local/Ascend/driver/lib64",
                                              "/usr/local/Ascend/driver/include",
                                              "/usr/local/Ascend/driver/version.info",
                                              "/usr/local/dcmi",
                                              "/usr/local/bin/npu-smi",
                                              "/etc/ascend_install.info",
                                              "/etc/hccn.conf"};

// The shim's injection mode the fixture's config names; RuncTest runs its tests in both.
class RuncFixture : public ::testing::Test {
 protected:
  virtual std::string injection() const { return "spec"; }
  virtual std::string extra_config() const { return ""; }  // more config.yaml lines

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (runc, mounts, device nodes)";
    if (!have_program("runc")) FAIL() << "runc is not installed (scripts/deps installs it)";
    if (::access("/bin/busybox", X_OK) != 0)
      FAIL() << "busybox-static is not installed (scripts/deps installs it)";
    host_ = std::make_unique<EmulatedHost>(tmp_ / "host");
    ASSERT_TRUE(host_->ok()) << host_->error();
    ASSERT_EQ(::symlink("hccn.conf", (tmp_ / "host/etc/ascend-link.conf").c_str()), 0);
    config_ = write_hook_config(
        tmp_.path(), tmp_ / "host",
        {{"links", "/etc/ascend-link.conf\n"}, {"sparse", "/usr/local/dcmi\n/opt/not-on-this-host\n"}},
        injection(), extra_config());
    auto s = npu::Emulator(tmp_ / "host").read_state();
    ASSERT_TRUE(s.ok()) << s.error().message();
    state_ = *s;
  }

  std::unique_ptr<Bundle> bundle(const std::vector<std::string>& env) {
    auto b = std::make_unique<Bundle>(tmp_ / ("bundle" + std::to_string(bundles_++)));
    spit(b->rootfs() + "/probe.sh", probe_script());
    b->set_args({"/bin/sh", "/probe.sh"});
    for (const auto& e : env) b->add_env(e);
    b->save();
    return b;
  }

  std::vector<std::string> shim() const { return {bin("ascend-docker-runtime"), "--config", config_}; }
  Output run(const Bundle& b, const std::string& id) { return runner_.run(shim(), b, id); }

  npu::HostState now() const { return npu::Emulator(tmp_ / "host").read_state().value(); }

  // The exact NPU nodes a container must hold: the chips (or vNPUs) and the three control nodes.
  std::map<std::string, std::string> expected_nodes(const std::vector<int>& ids,
                                                    bool is_virtual = false) const {
    std::map<std::string, std::string> want;
    auto text = [](int maj, int min) { return "c " + std::to_string(maj) + ":" + std::to_string(min); };
    for (int id : ids)
      want["/dev/davinci" + std::to_string(id)] =
          text(is_virtual ? state_.majors.vdavinci : state_.majors.davinci, id);
    want["/dev/davinci_manager"] = text(state_.majors.manager, 0);
    want["/dev/devmm_svm"] = text(state_.majors.svm, 0);
    want["/dev/hisi_hdc"] = text(state_.majors.hdc, 0);
    return want;
  }

  void expect_base_mounts(const Probe& p) const {
    for (const char* m : kBaseMounts) {
      auto it = p.mounts.find(m);
      ASSERT_NE(it, p.mounts.end()) << m;
      EXPECT_EQ(it->second.rfind("ro,nosuid,nodev", 0), 0U) << m << " " << it->second;
    }
  }

  TempDir tmp_{"runc"};
  std::unique_ptr<EmulatedHost> host_;
  std::string config_;
  npu::HostState state_;
  Runner runner_{tmp_ / "runc-state"};
  int bundles_ = 0;
};

// Tests whose outcome must not depend on how the driver files get in: run with injection "spec" (the runtime
// mounts them from config.json) and "hook" (the prestart hook mounts them).
class RuncTest : public RuncFixture, public ::testing::WithParamInterface<std::string> {
 protected:
  std::string injection() const override { return GetParam(); }
  bool by_hook() const { return GetParam() == "hook"; }
};

class RuncHookModeTest : public RuncFixture {
 protected:
  std::string injection() const override { return "hook"; }
};

}  // namespace ascend::hook
