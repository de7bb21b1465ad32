#include "dockerd.h"

#include <sys/stat.h>

#include <chrono>
#include <sstream>
#include <thread>

namespace ascend::hook::testing {

PrivateDockerd::PrivateDockerd(std::string dir, const std::string& daemon_json, std::string image)
    : dir_(std::move(dir)), image_(std::move(image)), sock_("unix://" + dir_ + "/docker.sock") {
  ::mkdir(dir_.c_str(), 0700);
  pid_ = spawn_background({"dockerd", "--config-file", daemon_json, "--data-root", dir_ + "/data",
                           "--exec-root", dir_ + "/exec", "--pidfile", dir_ + "/docker.pid", "-H", sock_,
                           "--iptables=false", "--ip6tables=false", "--bridge=none"},
                          dir_ + "/dockerd.log");
  if (pid_ <= 0) {
    error_ = "dockerd did not start";
    return;
  }
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    up = docker({"version"}).exit_code == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!up) {
    error_ = "dockerd did not start:\n" + slurp(dir_ + "/dockerd.log").substr(0, 4000);
    return;
  }
  make_busybox_rootfs(dir_ + "/image");
  auto imported = run({"sh", "-c",
                       "tar -C " + dir_ + "/image -c . | docker --config " + dir_ + "/cli -H " + sock_ +
                           " import -c 'ENV PATH=/usr/local/bin:/bin' - " + image_});
  if (imported.exit_code != 0) {
    error_ = "docker import: " + imported.err;
    return;
  }
  ok_ = true;
}

PrivateDockerd::~PrivateDockerd() {
  if (pid_ <= 0) return;
  auto ids = docker({"ps", "-aq"});
  std::istringstream in(ids.out);
  std::string id;
  while (std::getline(in, id)) {
    if (!id.empty()) docker({"rm", "-f", id});
  }
  docker({"rmi", "-f", image_});
  stop_process(pid_, std::chrono::seconds(20));
}

Output PrivateDockerd::docker(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"docker", "--config", dir_ + "/cli", "-H", sock_};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.timeout = std::chrono::seconds(90);
  return run(argv, o);
}

void require_docker() {
  if (!have_program("dockerd") || !have_program("docker"))
    FAIL() << "docker.io is not installed (scripts/deps installs it)";
}

void DockerdTest::load_host() {
  host_ = std::make_unique<EmulatedHost>(tmp_ / "host");
  ASSERT_TRUE(host_->ok()) << host_->error();
}

void DockerdTest::start_dockerd(const std::string& daemon_json, const std::string& image) {
  dockerd_ = std::make_unique<PrivateDockerd>(tmp_.path(), daemon_json, image);
  ASSERT_TRUE(dockerd_->ok()) << dockerd_->error();
}

}  // namespace ascend::hook::testing
