// End to end with real dockerd: a private daemon (dockerd.h PrivateDockerd, with a daemon.json that registers
// the runtime as `ascend`), a busybox-static image made with `docker import`, and the commands. Every
// container, image and daemon the test starts is removed. Root only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <regex>
#include <set>
#include <thread>

#include "dockerd.h"

namespace ascend::hook {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the test support helpers

constexpr const char* kImage = "ascend-hook-test/busybox:latest";

class DockerTest : public DockerdTest {
 protected:
  DockerTest() : DockerdTest("docker") {}

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (dockerd)";
    ASSERT_NO_FATAL_FAILURE(require_docker());
    if (::access("/bin/busybox", X_OK) != 0)
      FAIL() << "busybox-static is not installed (scripts/deps installs it)";
    ASSERT_NO_FATAL_FAILURE(load_host());
    std::string config = write_hook_config(tmp_.path(), tmp_ / "host");
    // The daemon.json is ascend-ctk's: the test proves that what it writes works with a real dockerd.
    auto conf = run({bin("ascend-ctk"), "runtime", "configure", "--runtime", "docker", "--file",
                     tmp_ / "daemon.json", "--runtime-arg=--config", "--runtime-arg=" + config});
    ASSERT_EQ(conf.exit_code, 0) << conf.err;
    ASSERT_NO_FATAL_FAILURE(start_dockerd(tmp_ / "daemon.json", kImage));
  }
};

TEST_F(DockerTest, RunWithTwoNpusShowsExactlyThoseInNpuSmi) {
  auto o = docker({"run", "--rm", "--network", "none", "--runtime=ascend", "-e", "ASCEND_VISIBLE_DEVICES=0,2",
                   kImage, "npu-smi", "info"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(smi_ids(o.out), (std::set<int>{0, 2})) << o.out;
  auto dev = docker({"run", "--rm", "--network", "none", "--runtime=ascend", "-e",
                     "ASCEND_VISIBLE_DEVICES=0,2", kImage, "sh", "-c", "ls /dev; env"});
  ASSERT_EQ(dev.exit_code, 0) << dev.err;
  for (const char* want : {"davinci0\n", "davinci2\n", "davinci_manager\n", "devmm_svm\n", "hisi_hdc\n",
                           "ASCEND_DOCKER_RUNTIME=True\n"}) {
    EXPECT_NE(dev.out.find(want), std::string::npos) << want << dev.out;
  }
  EXPECT_EQ(dev.out.find("davinci1\n"), std::string::npos) << dev.out;
}

TEST_F(DockerTest, BadRequestsFailWithTheMessageAndLeaveNothingRunning) {
  const std::pair<const char*, const char*> cases[] = {
      {"ASCEND_VISIBLE_DEVICES=9", "ASCEND_VISIBLE_DEVICES=9: no device 9 on this host (valid ids: 0-7)"},
      {"ASCEND_VISIBLE_DEVICES=3-1", "ASCEND_VISIBLE_DEVICES=3-1: reversed range 3-1"},
      {"ASCEND_RUNTIME_OPTIONS=BOGUS", "ASCEND_RUNTIME_OPTIONS=BOGUS: unknown option 'BOGUS'"},
  };
  for (const auto& [env, want] : cases) {
    SCOPED_TRACE(env);
    auto o = docker({"run", "--rm", "--network", "none", "--runtime=ascend", "-e", "ASCEND_VISIBLE_DEVICES=0",
                     "-e", env, kImage, "echo", "STARTED"});
    EXPECT_NE(o.exit_code, 0);
    EXPECT_EQ(o.out.find("STARTED"), std::string::npos);
    EXPECT_NE(o.err.find(want), std::string::npos) << o.err;
  }
  EXPECT_EQ(docker({"ps", "-q"}).out, "");
}

TEST_F(DockerTest, PlainRunIsUntouched) {
  for (const std::vector<std::string>& runtime :
       {std::vector<std::string>{}, std::vector<std::string>{"--runtime=ascend"}}) {
    std::vector<std::string> args = {"run", "--rm", "--network", "none"};
    args.insert(args.end(), runtime.begin(), runtime.end());
    args.insert(args.end(), {kImage, "sh", "-c", "ls /dev; env; cat /proc/self/mountinfo"});
    auto o = docker(args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.find("davinci"), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("ASCEND_"), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("/usr/local/Ascend"), std::string::npos) << o.out;
  }
}

}  // namespace
}  // namespace ascend::hook
