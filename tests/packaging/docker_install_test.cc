// The .run with a real dockerd, as a user would run it: a private daemon (dockerd.h PrivateDockerd: its own
// daemon.json, data root, socket and pid file), the package installed into scratch paths with
// --reload-engine, `docker info` listing the runtime, a container with two chips, and an uninstall that
// reloads the daemon without the runtime and leaves daemon.json byte for byte as it was. Root only; docker.io
// is required (scripts/deps).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <thread>

#include "dockerd.h"

namespace ascend::hook {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the test support helpers

constexpr const char* kImage = "ascend-pkg-test/busybox:latest";
constexpr const char* kOriginal = "{\"log-level\": \"warn\",\n \"runtimes\": {}}\n";

class DockerInstallTest : public DockerdTest {
 protected:
  DockerInstallTest() : DockerdTest("pkg-docker") {}

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (dockerd, the installer)";
    ASSERT_NO_FATAL_FAILURE(require_docker());
    ASSERT_EQ(::access(ASCEND_RUN, X_OK), 0) << ASCEND_RUN << " is not built (target run-package)";
    ASSERT_NO_FATAL_FAILURE(load_host());
    spit(tmp_ / "daemon.json", kOriginal);
    ASSERT_NO_FATAL_FAILURE(start_dockerd(tmp_ / "daemon.json", kImage));
  }

  static bool wait_for(const std::function<bool()>& ok) {
    for (int i = 0; i < 300; ++i) {
      if (ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  Output installer(std::vector<std::string> args) {
    std::vector<std::string> argv = {"env", "ASCEND_DOCKER_PIDFILE=" + (tmp_ / "docker.pid"), ASCEND_RUN};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {.timeout = std::chrono::seconds(120)});
  }

  bool runtime_listed() {
    return std::regex_search(docker({"info"}).out, std::regex("Runtimes:[^\n]*\\bascend\\b"));
  }
};

TEST_F(DockerInstallTest, InstallRunTwoChipsUninstallByteIdentical) {
  const std::string path = tmp_ / "Ascend-Docker-Runtime";
  const std::string config_dir = tmp_ / "ascend-docker-runtime.d";
  auto in = installer({"--install", "--install-path=" + path, "--config-dir=" + config_dir,
                       "--engine-config=" + (tmp_ / "daemon.json"), "--reload-engine"});
  ASSERT_EQ(in.exit_code, 0) << in.out << in.err;
  EXPECT_NE(in.out.find("reloaded dockerd"), std::string::npos) << in.out;
  ASSERT_TRUE(wait_for([&] { return runtime_listed(); })) << docker({"info"}).out;

  // The emulated host stands in for the machine's /dev: the one edit a test needs (and an edit the next
  // upgrade keeps).
  std::string yaml = slurp(config_dir + "/config.yaml");
  yaml = std::regex_replace(yaml, std::regex("\nhost-root: /\n"), "\nhost-root: " + host_->root() + "\n");
  spit(config_dir + "/config.yaml", yaml);
  auto o = docker({"run", "--rm", "--network", "none", "--runtime=ascend", "-e", "ASCEND_VISIBLE_DEVICES=0,1",
                   kImage, "npu-smi", "info"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(smi_ids(o.out), (std::set<int>{0, 1})) << o.out;

  // An upgrade that adds the CDI spec: valid for the CDI specification, removed by the uninstall.
  const std::string cdi_dir = tmp_ / "cdi";
  auto up = installer({"--upgrade", "--install-path=" + path, "--cdi=" + cdi_dir});
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_NE(up.out.find("no engine reload needed"), std::string::npos) << up.out;
  auto valid = run({path + "/ascend-ctk", "cdi", "validate", cdi_dir + "/huawei.com-npu.json"});
  EXPECT_EQ(valid.exit_code, 0) << valid.out << valid.err;

  auto un = installer({"--uninstall", "--install-path=" + path, "--reload-engine"});
  ASSERT_EQ(un.exit_code, 0) << un.out << un.err;
  EXPECT_EQ(slurp(tmp_ / "daemon.json"), kOriginal);
  EXPECT_TRUE(wait_for([&] { return !runtime_listed(); })) << docker({"info"}).out;
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << path << " is still there";
  EXPECT_NE(::access(config_dir.c_str(), F_OK), 0) << config_dir << " is still there";
  EXPECT_NE(::access((cdi_dir + "/huawei.com-npu.json").c_str(), F_OK), 0) << "the CDI spec is still there";
}

// The images target: each tarball loads into dockerd (no registry, no base image) and its binary runs, as the
// image's user, with the libraries found by ldd; the Kubernetes manifests name exactly these images and tags.
TEST_F(DockerInstallTest, ImagesLoadRunAndMatchTheManifests) {
  std::set<std::string> built;
  for (const char* name : {"ascend-device-plugin", "ascend-scheduler"}) {
    SCOPED_TRACE(name);
    const std::string tar = std::string(ASCEND_IMAGES_DIR) + "/" + name + "_" + ASCEND_VERSION + ".tar";
    ASSERT_EQ(::access(tar.c_str(), R_OK), 0) << tar << " is not built (target images)";
    auto loaded = docker({"load", "-i", tar});
    ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(loaded.out, m, std::regex("Loaded image: (\\S+)"))) << loaded.out;
    const std::string ref = m[1];
    built.insert(ref);
    auto help = docker({"run", "--rm", "--network", "none", ref, "--help"});
    EXPECT_EQ(help.exit_code, 0) << help.out << help.err;
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << help.out;
    auto user = docker({"image", "inspect", "--format", "{{.Config.User}}", ref});
    EXPECT_EQ(user.out, std::string(name) == "ascend-scheduler" ? "65532\n" : "0\n");
    docker({"rmi", "-f", ref});
  }
  std::set<std::string> named;
  for (const char* manifest : {"ascend-device-plugin.yaml", "ascend-scheduler.yaml"}) {
    std::string text = slurp(std::string(ASCEND_DEPLOY_DIR) + "/kubernetes/" + manifest);
    std::regex image("image: (ascend-[^\\s]+)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), image); it != std::sregex_iterator();
         ++it) {
      named.insert((*it)[1]);
    }
  }
  EXPECT_EQ(named, built);
}

// containerd (the one docker.io brings) with its own root, state and socket, running before the install as a
// host's containerd would: --install-scene=containerd writes the runtime into config.toml and keeps its
// comments; --reload-engine restarts that containerd through its pid file (no systemd here) with the same
// command line; `ctr run` through the installed runtime (BinaryName) gives the container the two chips;
// uninstall with --reload-engine restores config.toml exactly and restarts containerd again.
TEST(ContainerdInstall, CtrRunThroughTheInstalledRuntimeAndUninstallRestoresTheToml) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (containerd, the installer)";
  if (!have_program("containerd") || !have_program("ctr") || !have_program("containerd-shim-runc-v2"))
    FAIL() << "containerd is not installed (docker.io brings it; scripts/deps installs it)";
  TempDir tmp{"pkg-ctr"};
  EmulatedHost host(tmp / "host");
  ASSERT_TRUE(host.ok()) << host.error();
  const std::string toml = tmp / "config.toml";
  const std::string pidfile = tmp / "containerd.pid";
  const std::string original =
      "# containerd for the packaging test: comments must survive\nversion = 2\nroot = \"" + (tmp / "root") +
      "\"\nstate = \"" + (tmp / "state") + "\"\n\n[grpc]\n  address = \"" + (tmp / "containerd.sock") +
      "\" # private\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
      "  disable_tcp_service = true\n";
  spit(toml, original);
  make_busybox_rootfs(tmp / "rootfs");

  std::vector<std::string> ctr = {"ctr", "--address", tmp / "containerd.sock", "--namespace",
                                  "ascend-pkg-test"};
  auto ctr_run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = ctr;
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {.timeout = std::chrono::seconds(60)});
  };
  auto wait_up = [&] {
    for (int i = 0; i < 300; ++i) {
      if (ctr_run({"version"}).exit_code == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  auto pid_in_file = [&] {
    try {
      return std::stoi(slurp(pidfile));
    } catch (const std::exception&) {
      return -1;
    }
  };
  // Whatever containerd the pid file names at the end is stopped, whichever step failed.
  struct Stopper {
    std::function<void()> stop;
    ~Stopper() { stop(); }
  } stopper{[&] {
    // The restarted containerd is not this process's child (the installer started it): stop it by signal
    // and wait for its pid to go.
    int pid = pid_in_file();
    if (pid <= 0 || ::kill(pid, SIGTERM) != 0) return;
    for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) {
      ::waitpid(pid, nullptr, WNOHANG);  // reaps it when it is the first one, still a child
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid, SIGKILL);
  }};

  int first = spawn_background({"containerd", "--config", toml}, tmp / "containerd.log");
  ASSERT_GT(first, 0);
  spit(pidfile, std::to_string(first) + "\n");
  ASSERT_TRUE(wait_up()) << "containerd did not start:\n" << slurp(tmp / "containerd.log").substr(0, 4000);

  const std::string path = tmp / "Ascend-Docker-Runtime";
  const std::string config_dir = tmp / "ascend-docker-runtime.d";
  auto in = run(
      {"env", "ASCEND_CONTAINERD_PIDFILE=" + pidfile, ASCEND_RUN, "--install", "--install-scene=containerd",
       "--install-path=" + path, "--config-dir=" + config_dir, "--engine-config=" + toml, "--reload-engine"},
      {.timeout = std::chrono::seconds(120)});
  ASSERT_EQ(in.exit_code, 0) << in.out << in.err;
  EXPECT_NE(in.out.find("restarted containerd"), std::string::npos) << in.out;
  const int second = pid_in_file();
  EXPECT_GT(second, 0);
  EXPECT_NE(second, first) << "the pid file still names the containerd from before the install";
  EXPECT_EQ(::waitpid(first, nullptr, WNOHANG), first) << "the containerd from before the install still runs";
  std::string edited = slurp(toml);
  ASSERT_EQ(edited.rfind(original, 0), 0U) << "the original text is not kept:\n" << edited;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(edited, m, std::regex("BinaryName = '([^']+)'"))) << edited;
  const std::string binary = m[1];
  EXPECT_NE(
      edited.find("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.ascend]\n  runtime_type = "
                  "\"io.containerd.runc.v2\""),
      std::string::npos)
      << edited;

  std::string yaml = slurp(config_dir + "/config.yaml");
  yaml = std::regex_replace(yaml, std::regex("\nhost-root: /\n"), "\nhost-root: " + host.root() + "\n");
  spit(config_dir + "/config.yaml", yaml);

  ASSERT_TRUE(wait_up()) << "containerd did not come back with the installed config.toml:\n"
                         << slurp(tmp / "containerd.log").substr(0, 4000);
  auto o =
      ctr_run({"run", "--rm", "--runc-binary", binary, "--env", "ASCEND_VISIBLE_DEVICES=0,1", "--env",
               "PATH=/usr/local/bin:/bin", "--rootfs", tmp / "rootfs", "ascend-pkg-ctr", "npu-smi", "info"});
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_EQ(smi_ids(o.out), (std::set<int>{0, 1})) << o.out << o.err;
  auto dev =
      ctr_run({"run", "--rm", "--runc-binary", binary, "--env", "ASCEND_VISIBLE_DEVICES=0,1", "--env",
               "PATH=/usr/local/bin:/bin", "--rootfs", tmp / "rootfs", "ascend-pkg-ctr2", "ls", "/dev"});
  for (const char* want : {"davinci0\n", "davinci1\n", "davinci_manager\n"}) {
    EXPECT_NE(dev.out.find(want), std::string::npos) << want << dev.out << dev.err;
  }
  EXPECT_EQ(dev.out.find("davinci2\n"), std::string::npos) << dev.out;

  auto un = run({"env", "ASCEND_CONTAINERD_PIDFILE=" + pidfile, ASCEND_RUN, "--uninstall",
                 "--install-path=" + path, "--reload-engine"},
                {.timeout = std::chrono::seconds(120)});
  ASSERT_EQ(un.exit_code, 0) << un.out << un.err;
  EXPECT_EQ(slurp(toml), original);
  EXPECT_NE(pid_in_file(), second) << "uninstall --reload-engine did not restart containerd";
  EXPECT_TRUE(wait_up()) << "containerd did not come back after the uninstall:\n"
                         << slurp(tmp / "containerd.log").substr(0, 4000);
}

}  // namespace
}  // namespace ascend::hook
