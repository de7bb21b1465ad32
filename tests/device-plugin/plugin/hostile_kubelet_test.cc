// The device plugin under a hostile kubelet (issue 12): `ascend-device-plugin` runs as its own process
// against the fake kubelet and an emulated host; a real gRPC client sends Allocate with 100 000 unknown ids,
// with 100 000 repeats of valid ids, with a few unknown or repeated ids, a request of more than 4 MiB,
// GetPreferredAllocation with 100 000 ids, and opens and drops 1 000 ListAndWatch streams (half cancelled on
// one connection, half abandoned by closing their own connections). Each call must get a clear gRPC status
// (the right code, one message of bounded size that says what was wrong), the plugin must not crash and keep
// serving (a valid Allocate, a new stream), and its memory must stay bounded: VmRSS after eighteen rounds of
// all of it at most kRssMarginKb above its baseline (measured after one warm-up round, so that gRPC's and the
// allocator's first-use growth counts as baseline) and flat once warm (below), and its open file
// descriptors back to the baseline. Before this test, a request with 100 000 unknown or repeated ids (or one
// unknown id of 3 MiB) was answered with every id in the status message: over the HTTP/2 header limit, so the
// kubelet got RESOURCE_EXHAUSTED "received initial metadata size exceeds limit" instead of the error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "fake_kubelet.h"
#include "grpc_allocate.h"
#include "test_backend.h"
#include "test_dir.h"

extern char** environ;

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::TempDir;

// The plugin's resident memory after the hostile rounds. glibc keeps what a round's big requests (100 000
// ids, a 3 MiB id) used in its per-thread arenas: it does not return every page, and which arena serves a
// request, and whether that arena then keeps 3 MB more, depends on which gRPC thread takes the call. So the
// resident size climbs in steps of about 3 MB for the first rounds and then holds still: measured over 24
// rounds (2026-12-04, four runs, Release, the default arenas and one arena alike), +14 to +17 MB above the
// warm-up round's by round 8-12, then flat to round 24, once 8 MB lower for a round and back. A leak does
// not hold still: it grows every round (a round sends about 10 MB). So:
// - the memory is bounded: at most kRssMarginKb above the warm-up round's at the end;
// - it does not grow once warm: the highest of the last kWindow rounds is at most kGrowthKb above the
//   highest of the kWindow rounds before them (a leak of L per round shows as about kWindow x L; comparing
//   highs, not single rounds, leaves out a round that glibc trimmed).
// Checked by making the plugin keep ids of the refused requests (2026-12-04): 3.5 MB a round failed both
// checks (+21-25 MB between the windows); 0.5 MB a round failed 1 of 2 runs: a leak of about 1 MB a round or
// more fails it.
// Six rounds compared single readings before (rounds 1-2 against 5-6): the climb's last steps fell in
// between and failed it (3 of 3 runs here once, 1 run in a fresh-check container), with no leak.
constexpr int kWindow = 6;
constexpr int kRounds = 6 + 2 * kWindow;  // 6 to warm, then the two windows compared
constexpr long kRssMarginKb = 24 * 1024;
constexpr long kGrowthKb = 5 * 1024;
constexpr std::size_t kMaxMessage = 4096;  // a clear error is one line, not the request echoed back

long status_kb(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  }
  return -1;
}

int open_fds(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       it != std::filesystem::directory_iterator(); ++it)
    ++n;
  return n;
}

// Waits until the process's open fds hold still (the same count over half a second: the last round's
// streams and connections have ended on its side) and returns that count.
int quiet_fds(pid_t pid) {
  int last = -1;
  int same = 0;
  testing::eventually(
      [&] {
        const int now = open_fds(pid);
        same = now == last ? same + 1 : 0;
        last = now;
        return same >= 5;
      },
      testing::kEventually, 100ms);
  return last;
}

class HostileKubelet : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (npu-sim load makes device nodes)";
    root_ = tmp_ / "host";
    ASSERT_EQ(run({bin("npu-sim"), "load", "--profile", "atlas800t-a2", "--root", root_}), 0);
    kubelet_ = std::make_unique<FakeKubelet>(dir_);
    kubelet_->start();
    {
      std::ofstream f(tmp_ / "plugin.yaml");
      f << "kubelet-socket-dir: " << dir_ << "\nhost-root: " << root_ << "\nlog-level: warn\n"
        << "backend: " << ascend::testing::test_backend() << "\n"
        << "pod-resources-socket: " << (tmp_ / "none.sock") << "\n";
    }
    pid_ = spawn({bin("ascend-device-plugin"), "--config", tmp_ / "plugin.yaml"}, tmp_ / "plugin.log");
    ASSERT_GT(pid_, 0);
    ASSERT_TRUE(kubelet_->wait_registrations(1, 10s)) << slurp(tmp_ / "plugin.log");
    stub_ = kubelet_->plugin(kEndpoint);
  }

  void TearDown() override {
    stub_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      for (int i = 0; i < 500 && ::waitpid(pid_, &st, WNOHANG) == 0; ++i) std::this_thread::sleep_for(10ms);
      if (::waitpid(pid_, &st, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    kubelet_.reset();
    if (!root_.empty()) run({bin("npu-sim"), "unload", "--root", root_});
  }

  static std::string bin(const std::string& name) { return std::string(ASCEND_BIN_DIR) + "/" + name; }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    pid_t pid = -1;
    ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
  }
  static int run(const std::vector<std::string>& args) {
    pid_t pid = spawn(args, "/dev/null");
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  bool alive() const { return ::waitpid(pid_, nullptr, WNOHANG) == 0; }

  grpc::Status allocate(const v1beta1::AllocateRequest& req, v1beta1::AllocateResponse* resp = nullptr) {
    v1beta1::AllocateResponse ignored;
    return testing::send_allocate(*stub_, req, resp != nullptr ? resp : &ignored, 30s);
  }
  static v1beta1::AllocateRequest request(const std::vector<std::string>& ids) {
    return testing::allocate_request({ids});
  }

  // The plugin still serves: a valid Allocate is answered and a new stream gets the eight chips.
  void serves(const std::string& when) {
    ASSERT_TRUE(alive()) << when << ": the plugin died; its log:\n" << slurp(tmp_ / "plugin.log");
    v1beta1::AllocateResponse resp;
    auto s = allocate(request({"Ascend910-3"}), &resp);
    ASSERT_TRUE(s.ok()) << when << ": " << s.error_message();
    ASSERT_EQ(resp.container_responses_size(), 1);
    EXPECT_EQ(resp.container_responses(0).envs().at("ASCEND_VISIBLE_DEVICES"), "3") << when;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto reader = stub_->ListAndWatch(&ctx, v1beta1::Empty());
    v1beta1::ListAndWatchResponse first;
    ASSERT_TRUE(reader->Read(&first)) << when;
    EXPECT_EQ(first.devices_size(), 8) << when;
    ctx.TryCancel();
    reader->Finish();
  }

  // A refusal: the code, a message naming `what`, of bounded size.
  static void refused(const grpc::Status& s, grpc::StatusCode code, const std::string& what,
                      const std::string& label) {
    EXPECT_EQ(s.error_code(), code) << label << ": " << s.error_message().substr(0, 300);
    EXPECT_NE(s.error_message().find(what), std::string::npos)
        << label << ": " << s.error_message().substr(0, 300);
    EXPECT_LE(s.error_message().size(), kMaxMessage) << label;
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos) << label;
  }

  // Every hostile call once.
  void round(int n) {
    const std::string r = "round " + std::to_string(n);
    std::vector<std::string> ids;
    ids.reserve(100000);
    for (int i = 0; i < 100000; ++i) ids.push_back("Ascend910-x" + std::to_string(i));
    refused(allocate(request(ids)), grpc::StatusCode::INVALID_ARGUMENT, "100000 unknown device ids",
            r + ": 100 000 unknown ids");
    ids.clear();
    for (int i = 0; i < 100000; ++i) ids.push_back("Ascend910-" + std::to_string(i % 8));
    refused(allocate(request(ids)), grpc::StatusCode::INVALID_ARGUMENT, "99992 duplicate device ids",
            r + ": 100 000 repeats of valid ids");
    refused(allocate(request({"Ascend910-1", "Ascend910-99", "npu-core-0-0"})),
            grpc::StatusCode::INVALID_ARGUMENT, "unknown device ids Ascend910-99, npu-core-0-0",
            r + ": unknown ids");
    refused(allocate(request({"Ascend910-2", "Ascend910-2"})), grpc::StatusCode::INVALID_ARGUMENT,
            "duplicate device ids Ascend910-2", r + ": a repeated id");
    refused(allocate(request({std::string(3 * 1024 * 1024, 'x') + "\n\x01"})),
            grpc::StatusCode::INVALID_ARGUMENT, "unknown device ids xxxx", r + ": one unknown id of 3 MiB");
    refused(allocate(v1beta1::AllocateRequest()), grpc::StatusCode::INVALID_ARGUMENT, "no container requests",
            r + ": no containers");
    // More than gRPC's default 4 MiB: refused by gRPC before the plugin sees it.
    v1beta1::AllocateRequest big = request({std::string(4 * 1024 * 1024 + 16, 'A')});
    auto s = allocate(big);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r << ": " << s.error_message();
    // GetPreferredAllocation offered 100 000 ids, none of them this node's.
    {
      v1beta1::PreferredAllocationRequest req;
      auto* c = req.add_container_requests();
      for (int i = 0; i < 100000; ++i) c->add_available_deviceids("Ascend910-y" + std::to_string(i));
      c->set_allocation_size(4);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 30s);
      v1beta1::PreferredAllocationResponse resp;
      auto p = stub_->GetPreferredAllocation(&ctx, req, &resp);
      EXPECT_NE(p.error_code(), grpc::StatusCode::OK) << r << ": preferred from 100 000 unknown ids";
      EXPECT_NE(p.error_code(), grpc::StatusCode::UNAVAILABLE) << r << ": " << p.error_message();
      EXPECT_LE(p.error_message().size(), kMaxMessage) << r;
    }
    serves(r + ", the Allocate calls");
    if (::testing::Test::HasFatalFailure()) return;

    // 1 000 ListAndWatch streams: 500 on one connection, opened (first list read) then cancelled; 500 on a
    // connection each, abandoned by closing the connection.
    {
      struct Stream {
        std::unique_ptr<grpc::ClientContext> ctx;
        std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader;
      };
      std::vector<Stream> streams;
      for (int i = 0; i < 500; ++i) {
        Stream st{std::make_unique<grpc::ClientContext>(), nullptr};
        st.reader = stub_->ListAndWatch(st.ctx.get(), v1beta1::Empty());
        v1beta1::ListAndWatchResponse first;
        ASSERT_TRUE(st.reader->Read(&first)) << r << ": stream " << i;
        streams.push_back(std::move(st));
      }
      for (auto& st : streams) st.ctx->TryCancel();
      for (auto& st : streams) st.reader->Finish();
    }
    {
      for (int i = 0; i < 500; ++i) {
        auto stub = kubelet_->plugin(kEndpoint);  // a connection of its own
        grpc::ClientContext ctx;
        auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
        v1beta1::ListAndWatchResponse first;
        ASSERT_TRUE(reader->Read(&first)) << r << ": own-connection stream " << i;
        ctx.TryCancel();  // gRPC needs the call ended before its context goes; the connection then closes
        reader->Finish();
      }
    }
    serves(r + ", the streams");
  }

  static constexpr const char* kEndpoint = "ascend-Ascend910.sock";
  TempDir tmp_;
  std::string dir_ = tmp_ / "device-plugins";
  std::string root_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  pid_t pid_ = -1;
};

TEST_F(HostileKubelet, ClearErrorsNoCrashAndMemoryBackToItsBaseline) {
  serves("at the start");
  round(0);  // warm-up: gRPC's and malloc's first-use growth
  ASSERT_FALSE(HasFatalFailure());
  const int base_fds = quiet_fds(pid_);  // the warm-up's streams have ended on the server side
  const long base_rss = status_kb(pid_, "VmRSS:");
  std::vector<long> after;  // VmRSS after each round
  for (int n = 1; n <= kRounds; ++n) {
    round(n);
    ASSERT_FALSE(HasFatalFailure());
    after.push_back(status_kb(pid_, "VmRSS:"));
  }
  // Streams and connections are torn down on the plugin's threads: wait for them (what is left after the
  // wait is judged below).
  long rss = 0;
  int fds = 0;
  testing::eventually(
      [&] {
        rss = status_kb(pid_, "VmRSS:");
        fds = open_fds(pid_);
        return fds <= base_fds && rss <= base_rss + kRssMarginKb;
      },
      testing::kEventually, 100ms);
  std::printf(
      "plugin VmRSS: %ld kB after the warm-up round, then %s kB after each of %d rounds, %ld kB at the "
      "end (margin %ld kB); open fds %d -> %d; threads %ld\n",
      base_rss, ::testing::PrintToString(after).c_str(), kRounds, rss, kRssMarginKb, base_fds, fds,
      status_kb(pid_, "Threads:"));
  EXPECT_LE(rss, base_rss + kRssMarginKb) << "the plugin's memory did not come back";
  const long before = *std::max_element(after.end() - 2 * kWindow, after.end() - kWindow);
  const long last = *std::max_element(after.end() - kWindow, after.end());
  EXPECT_LE(last - before, kGrowthKb) << "the plugin's memory grows round after round: a leak";
  EXPECT_LE(fds, base_fds + 2) << "connections or streams left open";
  serves("at the end");
}

}  // namespace
}  // namespace ascend::plugin
