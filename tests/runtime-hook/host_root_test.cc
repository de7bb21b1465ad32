// The emulated host loaded at / as on a real Atlas host: its device nodes in /dev, its driver tree and its
// libdcmi.so in /usr/local/dcmi (so that `backend: auto` picks DCMI, as it does on every real host). The
// runtime's vNPU and device paths then run as they do there: through ascend-dcmi-query for whatever the
// device nodes cannot tell, from the hook after it has hardened itself (no exec: its exec broker runs the
// helper).
//
// - A container with a dynamic vNPU leaves no vNPU behind on exit, under a real dockerd and under runc, with
//   `backend` auto, emulator and dcmi (issue 21: the poststop hook could not run the helper, so every vNPU
//   leaked on a host with libdcmi.so).
// - The prestart hook (injection: hook) reaches DCMI for a chip asked by name.
// - `npu-sim unload` leaves no /dev/char link pointing at a node it removed, and other devices' links as
//   they were.
//
// Root only, and only on a machine without an Ascend driver: the test refuses to load over one. The tests run
// serially (RUN_SERIAL): nothing else may see a host at / meanwhile.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <regex>
#include <thread>

#include "ascend/npu/emulator.h"
#include "dockerd.h"
#include "support.h"

namespace ascend::hook {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the test support helpers
using namespace std::chrono_literals;

constexpr const char* kImage = "ascend-host-root-test/busybox:latest";

// What `npu-sim load` puts on a host, any of which means a driver (real or not ours) is there.
constexpr const char* kDriverPaths[] = {"/dev/davinci0",   "/dev/davinci_manager",     "/usr/local/Ascend",
                                        "/usr/local/dcmi", "/etc/ascend_install.info", "/etc/hccn.conf"};

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

// Every /dev/char entry and where it leads.
std::map<std::string, std::string> dev_char_links() {
  std::map<std::string, std::string> out;
  DIR* d = ::opendir("/dev/char");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    char buf[4096];
    ssize_t n = ::readlink(("/dev/char/" + name).c_str(), buf, sizeof buf);
    out[name] = n < 0 ? std::string("(not a link)") : std::string(buf, static_cast<std::size_t>(n));
  }
  ::closedir(d);
  return out;
}

std::vector<std::string> vnpu_nodes() {
  std::vector<std::string> out;
  DIR* d = ::opendir("/dev");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (std::string(e->d_name).starts_with("vdavinci")) out.emplace_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

// The host's vNPUs and their nodes are gone (the poststop hook runs as the container is deleted; docker run
// --rm may return a moment before).
::testing::AssertionResult no_vnpu_left() {
  std::vector<std::string> nodes;
  std::size_t in_state = 0;
  for (int i = 0; i < 100; ++i) {
    nodes = vnpu_nodes();
    auto s = npu::Emulator("/").read_state();
    in_state = s ? s->vnpus.size() : 0;
    if (nodes.empty() && in_state == 0) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(100ms);
  }
  std::string names;
  for (const auto& n : nodes) names += " /dev/" + n;
  return ::testing::AssertionFailure()
         << in_state << " vNPU(s) in the state and nodes" << names << " 10 s after the container exited";
}

class HostAtRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a host at /, device nodes, runc, dockerd)";
    if (npu::Emulator("/").loaded()) {
      // A run killed before its teardown: that host is ours to remove.
      run({bin("npu-sim"), "unload", "--root", "/"});
    }
    for (const char* p : kDriverPaths) {
      if (exists(p))
        GTEST_SKIP() << p << " exists: this machine has an Ascend driver (or a copy), and the test loads an "
                     << "emulated host at / only where there is none";
    }
    links_before_ = dev_char_links();
    host_ = std::make_unique<EmulatedHost>("/");
    ASSERT_TRUE(host_->ok()) << host_->error();
    ASSERT_TRUE(exists("/usr/local/dcmi/libdcmi.so")) << "npu-sim load installs the driver's libdcmi.so";
  }

  void TearDown() override {
    host_.reset();  // npu-sim unload
  }

  // A config for the runtime with host-root / and the given backend; the helper is the build's
  // ascend-dcmi-query beside the shim (the default).
  std::string config(const std::string& backend, const std::string& injection = "spec") {
    std::string path = write_hook_config(tmp_.path(), "/", {}, injection);
    std::string text = slurp(path);
    text = std::regex_replace(text, std::regex("\nbackend: [a-z]+\n"), "\nbackend: " + backend + "\n");
    spit(path, text);
    ::chmod(path.c_str(), 0640);
    return path;
  }

  std::string hook_log() const { return slurp(tmp_ / "log/ascend.log"); }

  TempDir tmp_{"hostroot"};
  std::map<std::string, std::string> links_before_;
  std::unique_ptr<EmulatedHost> host_;
};

class HostAtRootBackend : public HostAtRoot, public ::testing::WithParamInterface<std::string> {};

INSTANTIATE_TEST_SUITE_P(Backend, HostAtRootBackend, ::testing::Values("auto", "emulator", "dcmi"),
                         [](const auto& info) { return info.param; });

// The command, as a user runs it.
TEST_P(HostAtRootBackend, DockerRunWithADynamicVnpuLeavesNoVnpuBehind) {
  ASSERT_NO_FATAL_FAILURE(require_docker());
  const std::string cfg = config(GetParam());
  auto conf = run({bin("ascend-ctk"), "runtime", "configure", "--runtime", "docker", "--file",
                   tmp_ / "daemon.json", "--runtime-arg=--config", "--runtime-arg=" + cfg});
  ASSERT_EQ(conf.exit_code, 0) << conf.err;
  PrivateDockerd dockerd(tmp_ / "docker", tmp_ / "daemon.json", kImage);
  ASSERT_TRUE(dockerd.ok()) << dockerd.error();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("container " + std::to_string(round));
    auto o = dockerd.docker({"run", "--rm", "--network", "none", "--runtime=ascend", "-e",
                             "ASCEND_VISIBLE_DEVICES=4", "-e", "ASCEND_VNPU_SPECS=vir05_1c_16g", kImage, "sh",
                             "-c", "ls /dev | grep davinci"});
    ASSERT_EQ(o.exit_code, 0) << o.err << hook_log();
    // The vNPU's node under the chip's name (vNPU ids of chip 4 start at 100 + 4 * 16: the report).
    EXPECT_NE(o.out.find("davinci164\n"), std::string::npos) << o.out;
    EXPECT_TRUE(no_vnpu_left()) << hook_log();
  }
  EXPECT_EQ(hook_log().find("Operation not permitted"), std::string::npos) << hook_log();
}

TEST_P(HostAtRootBackend, RuncWithADynamicVnpuLeavesNoVnpuBehindInBothInjectionModes) {
  for (const char* injection : {"spec", "hook"}) {
    SCOPED_TRACE(std::string("injection: ") + injection);
    const std::string cfg = config(GetParam(), injection);
    Bundle b(tmp_ / (std::string("bundle-") + injection));
    b.set_args({"/bin/sh", "-c", "ls /dev | grep davinci"});
    b.add_env("ASCEND_VISIBLE_DEVICES=4");
    b.add_env("ASCEND_VNPU_SPECS=vir05_1c_16g");
    b.save();
    Runner runner(tmp_ / "runc-state");
    auto o = runner.run({bin("ascend-docker-runtime"), "--config", cfg}, b, unique_id("hostroot"));
    ASSERT_EQ(o.exit_code, 0) << o.err << hook_log();
    EXPECT_NE(o.out.find("davinci164\n"), std::string::npos) << o.out;
    EXPECT_TRUE(no_vnpu_left()) << hook_log();
  }
}

// The other path where the hardened hook needs the helper: a chip asked by name is resolved from the full
// snapshot, which with DCMI only the helper gives.
TEST_P(HostAtRootBackend, TheHookResolvesAChipByNameAfterHardening) {
  const std::string cfg = config(GetParam(), "hook");
  Bundle b(tmp_ / "bundle-named");
  b.set_args({"/bin/sh", "-c", "ls /dev | grep davinci"});
  b.add_env("ASCEND_VISIBLE_DEVICES=Ascend910-3");
  b.save();
  Runner runner(tmp_ / "runc-state");
  auto o = runner.run({bin("ascend-docker-runtime"), "--config", cfg}, b, unique_id("named"));
  ASSERT_EQ(o.exit_code, 0) << o.err << hook_log();
  EXPECT_NE(o.out.find("davinci3\n"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("davinci4\n"), std::string::npos) << o.out;
}

TEST_F(HostAtRoot, UnloadLeavesNoDevCharLinkToTheNodesItRemoved) {
  // Containers made /dev/char links for the chips, the control nodes and a vNPU (dev_char.h: the runtime
  // makes them because the driver's nodes have none from udev).
  const std::string cfg = config("auto");
  Bundle b(tmp_ / "bundle");
  b.set_args({"/bin/true"});
  b.add_env("ASCEND_VISIBLE_DEVICES=0");
  b.save();
  Runner runner(tmp_ / "runc-state");
  auto o = runner.create({bin("ascend-docker-runtime"), "--config", cfg}, b, "ascend-hostroot-links");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  runner.remove("ascend-hostroot-links");
  auto s = npu::Emulator("/").read_state();
  ASSERT_TRUE(s.ok()) << s.error().message();
  const npu::HostState state = *s;
  auto v = npu::Emulator("/").create_vnpu(4, "vir05_1c_16g", std::nullopt, {});
  ASSERT_TRUE(v.ok()) << v.error().message();
  auto made = run({bin("ascend-ctk"), "--config", cfg, "system", "create-dev-char-symlinks"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::vector<npu::DeviceNode> ours = state.control_nodes();
  ours.push_back(state.chip_node(0));
  ours.push_back(state.vnpu_node(v->id));
  for (const auto& n : ours) {
    const std::string name = std::to_string(n.major) + ":" + std::to_string(n.minor);
    EXPECT_EQ(dev_char_links()[name], ".." + n.path.substr(4)) << name << " before unload";
  }
  host_.reset();  // npu-sim unload
  // Exactly the links there were before the host was loaded: ours gone, everyone else's as they were.
  EXPECT_EQ(dev_char_links(), links_before_);
}

}  // namespace
}  // namespace ascend::hook
