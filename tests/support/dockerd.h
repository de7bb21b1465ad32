// The docker tests' private dockerd (tests/runtime-hook, tests/packaging): a daemon of the test's own beside
// any other, and the fixture that starts one over an emulated host. Root only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support.h"

namespace ascend::hook::testing {

// A private dockerd under `dir` (its own data root, exec root, socket, pid file; `daemon_json` its config,
// which registers the runtimes), whether or not another daemon runs, with a busybox-static image imported as
// `image`. Every container, the image and the daemon are removed on destruction. Root only.
class PrivateDockerd {
 public:
  PrivateDockerd(std::string dir, const std::string& daemon_json, std::string image);
  ~PrivateDockerd();
  PrivateDockerd(const PrivateDockerd&) = delete;
  PrivateDockerd& operator=(const PrivateDockerd&) = delete;
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& image() const { return image_; }
  // `docker` with this daemon's socket and a private client config.
  Output docker(const std::vector<std::string>& args);

 private:
  std::string dir_;
  std::string image_;
  std::string sock_;
  int pid_ = -1;
  bool ok_ = false;
  std::string error_;
};

// Fails the test (a fatal failure: wrap the call in ASSERT_NO_FATAL_FAILURE) unless docker.io is installed.
void require_docker();

// A test with a private dockerd over an emulated host, both under tmp_ (folder tag `tag`). The test's SetUp
// says what it needs (the skip unless root is its own), then calls load_host() and start_dockerd(); each
// fails the test with the reason, fatally.
class DockerdTest : public ::testing::Test {
 protected:
  explicit DockerdTest(const std::string& tag) : tmp_(tag) {}

  // The emulated host at tmp_/host (host_).
  void load_host();
  // The daemon under tmp_ with `daemon_json`, `image` imported (dockerd_).
  void start_dockerd(const std::string& daemon_json, const std::string& image);
  Output docker(const std::vector<std::string>& args) { return dockerd_->docker(args); }

  TempDir tmp_;
  std::unique_ptr<EmulatedHost> host_;
  std::unique_ptr<PrivateDockerd> dockerd_;
};

}  // namespace ascend::hook::testing
