// ascend-device-plugin with a scheduler: the real daemon against the fake kubelet (grpc++ over unix sockets)
// and a fake scheduler extender (cpp-httplib on loopback, real HTTP): the inventory at start, after a fault
// and after Allocate, retries while the scheduler is away, GetPreferredAllocation from reservations,
// Allocate's env and rank table, 404 and 409, an unreachable or hanging scheduler, the token, https, and
// the binary's flags.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "ascend/common/fs.h"
#include "ascend/common/unique_fd.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/daemon.h"
#include "ascend/plugin/plugin.h"
#include "ascend/plugin/scheduler_client.h"
#include "eventually.h"
#include "fake_kubelet.h"
#include "fake_scheduler.h"
#include "grpc_allocate.h"
#include "plugin_fixture.h"
#include "run_command.h"
#include "test_dir.h"
#include "test_query.h"

extern char** environ;

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::FakeKubelet;
using testing::FakeScheduler;
using testing::SchedulerRequest;
using testing::TempDir;

constexpr const char* kToken = "secret-token";
constexpr const char* kEndpoint = "ascend-Ascend910.sock";

// The inventory the contract expects for an 8-chip node, written out by hand.
json inventory(const std::set<int>& unhealthy, const std::set<int>& in_use) {
  json chips = json::array();
  for (int i = 0; i < 8; ++i) {
    chips.push_back({{"phy_id", i}, {"healthy", unhealthy.count(i) == 0}, {"in_use", in_use.count(i) != 0}});
  }
  return {{"resource", "huawei.com/Ascend910"}, {"chips", chips}};
}

// The telemetry a report carries for the scheduler's dashboard (checked by its own test below): left out
// of the comparisons of health and use.
json without_load(json body) {
  if (body.contains("chips") && body["chips"].is_array()) {
    for (auto& c : body["chips"]) {
      for (const char* k : {"aicore_pct", "hbm_used_mb", "hbm_total_mb"}) c.erase(k);
    }
  }
  return body;
}

auto put_of(const json& body) {
  return [body](const SchedulerRequest& r) { return r.method == "PUT" && without_load(r.json()) == body; };
}

std::vector<std::string> ids(const std::vector<int>& phys) {
  std::vector<std::string> out;
  out.reserve(phys.size());
  for (int p : phys) out.push_back("Ascend910-" + std::to_string(p));
  return out;
}

std::string scrape(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : "";
}

class SchedulerE2E : public testing::PluginFixture {
 protected:
  FakeScheduler sched;

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(load("atlas800t-a2"));
    ASSERT_TRUE(atomic_replace(tmp / "token", std::string(kToken) + "\n").ok());
    sched.require_token(kToken);
  }

  Config config(const std::string& url) {
    Config c = PluginFixture::config();
    c.scheduler_url = url;
    c.node_name = "node-1";
    c.scheduler_token_file = tmp / "token";
    c.ranktable_dir = tmp / "ranktables";
    c.reconcile_every = 50ms;
    c.promise_grace = 300ms;
    c.ranktable_refresh = 100ms;
    return c;
  }

  // Waits until the plugin counts at least `n` inventory reports that got no answer (its metrics listener
  // must be on).
  bool reports_failed(int n) {
    const std::string key = "ascend_device_plugin_scheduler_errors_total{call=\"inventory\"} ";
    return testing::eventually(
        [&] {
          const std::string body = scrape(daemon->metrics_port());
          const auto at = body.find(key);
          return at != std::string::npos && std::stod(body.substr(at + key.size())) >= n;
        },
        testing::kEventually, 50ms);
  }

  // Lets the promise grace pass (real time: the ledger's clock) while the kubelet still lists the chips, then
  // waits for two more reconcile passes to ask the kubelet.
  void past_grace_while_listed() {
    std::this_thread::sleep_for(config("").promise_grace);
    const int lists = kubelet->pod_resources_lists();
    ASSERT_TRUE(testing::eventually([&] { return kubelet->pod_resources_lists() >= lists + 2; }));
  }

  v1beta1::ContainerAllocateResponse allocate(const std::vector<int>& phys, grpc::Status* status) {
    return testing::first_container(testing::allocate(*kubelet->plugin(kEndpoint), {ids(phys)}, status, 5s));
  }

  std::vector<std::string> preferred(const std::vector<int>& available, int size,
                                     const std::vector<int>& must = {}) {
    auto stub = kubelet->plugin(kEndpoint);
    v1beta1::PreferredAllocationRequest req;
    auto* cr = req.add_container_requests();
    for (const auto& id : ids(available)) cr->add_available_deviceids(id);
    for (const auto& id : ids(must)) cr->add_must_include_deviceids(id);
    cr->set_allocation_size(size);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1beta1::PreferredAllocationResponse resp;
    grpc::Status s = stub->GetPreferredAllocation(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok() || resp.container_responses_size() != 1) return {};
    const auto& got = resp.container_responses(0).deviceids();
    return {got.begin(), got.end()};
  }

  int npu_sim(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {std::string(ASCEND_BIN_DIR) + "/npu-sim", "--root", root};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::run_command(argv).exit_code;
  }
};

std::map<std::string, std::string> envs_of(const v1beta1::ContainerAllocateResponse& c) {
  return {c.envs().begin(), c.envs().end()};
}

// ---- inventory ------------------------------------------------------------------------------------------

// How long a fault takes to reach the scheduler is printed, not asserted (a busy machine would fail a bound).
TEST_F(SchedulerE2E, InventoryArrivesAtStartAndOnAFaultAndItsClearing) {
  ASSERT_GT(sched.start(), 0);
  serve(config(sched.url()));
  SchedulerRequest first;
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s, &first));
  EXPECT_EQ(first.path, "/v1/nodes/node-1");
  EXPECT_EQ(first.content_type, "application/json");
  EXPECT_EQ(first.authorization, std::string("Bearer ") + kToken);

  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(npu_sim({"fault", "set", "--device", "3", "--code", "0x80E18402", "--severity", "critical"}), 0);
  SchedulerRequest after;
  ASSERT_TRUE(sched.wait_for(put_of(inventory({3}, {})), testing::kEventually, &after));
  std::printf(
      "fault -> inventory at the scheduler in %lld ms\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(after.at - t0).count()));

  // A Warning is sub-health: still healthy, so the scheduler hears nothing new. An Alarm is unhealthy.
  ASSERT_EQ(npu_sim({"fault", "set", "--device", "2", "--code", "0x80000001", "--severity", "warning"}), 0);
  ASSERT_EQ(npu_sim({"fault", "set", "--device", "5", "--code", "0x84000001", "--severity", "alarm"}), 0);
  ASSERT_TRUE(sched.wait_for(put_of(inventory({3, 5}, {})), 5s));

  ASSERT_EQ(npu_sim({"fault", "clear", "--device", "3"}), 0);
  ASSERT_TRUE(sched.wait_for(put_of(inventory({5}, {})), testing::kEventually, &after));
  for (const auto& r : sched.requests()) {
    EXPECT_EQ(r.authorization, std::string("Bearer ") + kToken) << r.method << " " << r.path;
  }
}

// Each chip's AICore use and on-chip memory go with the report (the scheduler's dashboard draws them), and a
// chip made busy is reported again. Expected values: the Atlas 800T A2 profile's chip 1
// (npu-smi-sim/profiles/atlas800t-a2.json: 65536 MB of HBM, 3314 MB used idle, AICore 0 %), and
// `npu-sim load-gen --util 80 --hbm 16` (80 %, 16384 MB more).
TEST_F(SchedulerE2E, TheInventoryCarriesEachChipsLoadForTheDashboard) {
  ASSERT_GT(sched.start(), 0);
  serve(config(sched.url()));
  SchedulerRequest first;
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s, &first));
  const json idle = first.json()["chips"][1];
  EXPECT_EQ(idle.value("aicore_pct", -1), 0) << first.body;
  EXPECT_EQ(idle.value("hbm_total_mb", -1), 65536);
  EXPECT_EQ(idle.value("hbm_used_mb", -1), 3314);
  ASSERT_EQ(npu_sim({"load-gen", "--device", "1", "--util", "80", "--hbm", "16"}), 0);
  SchedulerRequest busy;
  EXPECT_TRUE(sched.wait_for(
      [](const SchedulerRequest& r) {
        if (r.method != "PUT") return false;
        const json c = r.json()["chips"][1];
        return c.value("aicore_pct", -1) == 80 && c.value("hbm_used_mb", -1) == 3314 + 16384 &&
               c.value("hbm_total_mb", -1) == 65536;
      },
      10s, &busy))
      << "chip 1 busy in a report";
}

TEST_F(SchedulerE2E, InventoryIsRetriedUntilTheSchedulerComesUpLate) {
  const int port = sched.start();
  ASSERT_GT(port, 0);
  const std::string url = sched.url();
  sched.stop();  // the port is known; nothing listens on it yet
  Config cfg = config(url);
  cfg.metrics_addr = "127.0.0.1:0";
  serve(cfg);
  std::string body;
  EXPECT_TRUE(testing::eventually(
      [&] {
        body = scrape(daemon->metrics_port());
        return body.find("ascend_device_plugin_scheduler_errors_total{call=\"inventory\"}") !=
               std::string::npos;
      },
      testing::kEventually, 50ms))
      << body;
  // The plugin serves the kubelet meanwhile.
  auto w = kubelet->watch(kEndpoint);
  ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s));

  ASSERT_EQ(sched.start(port), port);
  // The backoff (100 ms doubling, capped at 10 s: the reporter's unit tests) brings the report.
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), testing::kEventually));
}

TEST_F(SchedulerE2E, ARefusedReportIsRetriedAtTheSlowRate) {
  ASSERT_GT(sched.start(), 0);
  sched.set_inventory_answer(404, "node node-1 is not in the cluster file");
  Config cfg = config(sched.url());
  cfg.report_every = 700ms;
  serve(cfg);
  ASSERT_TRUE(testing::eventually([&] { return sched.requests("PUT").size() >= 3; }));
  const auto puts = sched.requests("PUT");
  EXPECT_GE(puts[1].at - puts[0].at, cfg.report_every) << "a 4xx is not retried at the fast rate";
  EXPECT_GE(puts[2].at - puts[1].at, cfg.report_every) << "a 4xx is not retried at the fast rate";
  // Once the scheduler knows the node, it gets the report.
  sched.set_inventory_answer(200);
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s));
}

TEST_F(SchedulerE2E, AllocatedChipsAreInUseUntilThePodResourcesNoLongerListThem) {
  ASSERT_GT(sched.start(), 0);
  serve(config(sched.url()));
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s));
  kubelet->set_in_use({{"huawei.com/Ascend910", {"Ascend910-4", "Ascend910-5"}}});
  grpc::Status s;
  allocate({5, 4}, &s);  // no reservation: 404, answered as today
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {4, 5})), testing::kEventually));
  // While the kubelet lists them they stay in use, past the grace period.
  past_grace_while_listed();
  EXPECT_FALSE(sched.wait_for(put_of(inventory({}, {})), 10ms));
  // The pod is gone.
  kubelet->set_in_use({});
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s));
}

// ---- GetPreferredAllocation -----------------------------------------------------------------------------

TEST_F(SchedulerE2E, PreferredReturnsTheReservationInsideAvailableElseTheNodeLevelChoice) {
  ASSERT_GT(sched.start(), 0);
  serve(config(sched.url()));
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<int> no7 = {0, 1, 2, 3, 4, 5, 6};
  // The node-level choices, with no reservation.
  const auto alone4 = preferred(all, 4);
  const auto alone4_no7 = preferred(no7, 4);
  const auto alone2 = preferred(all, 2);
  const auto alone4_must0 = preferred(all, 4, {0});
  ASSERT_EQ(alone4.size(), 4U);
  ASSERT_NE(alone4, ids({4, 5, 6, 7})) << "the reservation below must differ from the node-level choice";
  ASSERT_NE(alone2, ids({6, 7}));

  sched.set_reservations(json::parse(R"([
      {"namespace": "default", "pod": "train-1", "job": "train", "chips": [7, 6, 5, 4]},
      {"namespace": "ml", "pod": "small", "job": "", "chips": [6, 7]}])"));
  EXPECT_EQ(preferred(all, 4), ids({4, 5, 6, 7}));
  EXPECT_EQ(preferred(all, 2), ids({6, 7}));
  EXPECT_EQ(preferred(no7, 4), alone4_no7) << "chip 7 is not available: the node-level choice";
  EXPECT_EQ(preferred(all, 4, {0}), alone4_must0) << "must-include 0 is not in the reservation";
  EXPECT_EQ(preferred(all, 3).size(), 3U) << "no reservation of size 3";

  const auto gets = sched.requests("GET");
  ASSERT_FALSE(gets.empty());
  EXPECT_EQ(gets.back().path, "/v1/nodes/node-1/reservations");
  EXPECT_EQ(gets.back().authorization, std::string("Bearer ") + kToken);
}

// ---- Allocate -------------------------------------------------------------------------------------------

TEST_F(SchedulerE2E, AllocateWithAReservationGivesTheJobEnvAndARankTableMount) {
  ASSERT_GT(sched.start(), 0);
  const json table = json::parse(R"({"version": "1.0", "server_count": "4", "status": "completed",
      "server_list": [{"server_id": "node-1", "device": [
        {"device_id": "4", "device_ip": "192.168.100.105", "rank_id": "8"},
        {"device_id": "5", "device_ip": "192.168.100.106", "rank_id": "9"}]}]})");
  const json env = {{"ASCEND_JOB", "train"}, {"RANK_TABLE_FILE", "/etc/ascend/hccl.json"},
                    {"RANK_SIZE", "32"},     {"RANK_START", "8"},
                    {"NODE_RANK", "1"},      {"NNODES", "4"},
                    {"NPROC_PER_NODE", "8"}, {"WORLD_SIZE", "32"}};
  sched.set_allocation_answer({4, 5, 6, 7}, 200,
                              {{"namespace", "default"},
                               {"pod", "train-1"},
                               {"job", "train"},
                               {"env", env},
                               {"ranktable_path", "/etc/ascend/hccl.json"},
                               {"ranktable", table}});
  sched.set_allocation_answer(
      {0}, 200, {{"namespace", "default"}, {"pod", "solo"}, {"job", ""}, {"env", json::object()}});
  serve(config(sched.url()));

  grpc::Status s;
  auto c = allocate({6, 4, 7, 5}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto want_env = env.get<std::map<std::string, std::string>>();
  want_env["ASCEND_VISIBLE_DEVICES"] = "4,5,6,7";
  EXPECT_EQ(envs_of(c), want_env);
  ASSERT_EQ(c.mounts_size(), 5);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(c.mounts(i).container_path(), "/var/run/ascend-container-devices/" + std::to_string(4 + i));
  const auto& m = c.mounts(4);
  EXPECT_EQ(m.container_path(), "/etc/ascend") << "the folder of ranktable_path";
  EXPECT_EQ(m.host_path(), tmp / "ranktables/default_train-1");
  EXPECT_TRUE(m.read_only());
  const std::string file = m.host_path() + "/hccl.json";
  auto content = read_file(file);
  ASSERT_TRUE(content.ok()) << content.error().message();
  EXPECT_EQ(*content, table.dump(4));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_IRUSR | S_IWUSR | S_IRGRP)) << "0640";

  auto posts = sched.requests("POST");
  ASSERT_EQ(posts.size(), 1U);
  EXPECT_EQ(posts[0].path, "/v1/nodes/node-1/allocations");
  EXPECT_EQ(posts[0].json(), json::parse(R"({"chips": [4, 5, 6, 7]})"));
  EXPECT_EQ(posts[0].content_type, "application/json");
  EXPECT_EQ(posts[0].authorization, std::string("Bearer ") + kToken);

  // A pod without a job: env {} and no rank table, so the answer is what it is without a scheduler.
  auto solo = allocate({0}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(envs_of(solo), (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "0"}}));
  EXPECT_EQ(solo.mounts_size(), 1);
}

// Whoever answers in the scheduler's place must not get code into the container (LD_PRELOAD, PATH) or
// change its devices (ASCEND_*): only the launch env docs/device-plugin.md documents reaches it.
TEST_F(SchedulerE2E, AllocateTakesOnlyTheDocumentedLaunchEnvFromTheScheduler) {
  ASSERT_GT(sched.start(), 0);
  const std::map<std::string, std::string> documented = {
      {"ASCEND_JOB", "train"}, {"RANK_TABLE_FILE", "/etc/ascend/hccl.json"},
      {"RANK_SIZE", "16"},     {"WORLD_SIZE", "16"},
      {"RANK_START", "8"},     {"NODE_RANK", "1"},
      {"NNODES", "2"},         {"NPROC_PER_NODE", "8"}};
  json env = documented;
  env["LD_PRELOAD"] = "/tmp/evil.so";
  env["LD_LIBRARY_PATH"] = "/tmp";
  env["PATH"] = "/tmp:/usr/bin";
  env["ASCEND_RUNTIME_OPTIONS"] = "NODRV";
  env["ASCEND_VISIBLE_DEVICES"] = "all";
  env["ASCEND_VNPU_SPECS"] = "vir01";
  env["SOME_UNKNOWN_NAME"] = "x";
  sched.set_allocation_answer({0, 1, 2, 3, 4, 5, 6, 7}, 200,
                              {{"namespace", "default"}, {"pod", "train-1"}, {"job", "train"}, {"env", env}});
  serve(config(sched.url()));
  grpc::Status s;
  auto c = allocate({0, 1, 2, 3, 4, 5, 6, 7}, &s);
  ASSERT_TRUE(s.ok()) << "the Allocate succeeds without the dropped names: " << s.error_message();
  auto want = documented;
  want["ASCEND_VISIBLE_DEVICES"] = "0,1,2,3,4,5,6,7";  // the plugin's, not the scheduler's "all"
  EXPECT_EQ(envs_of(c), want);
  EXPECT_EQ(c.mounts_size(), 8) << "only the plugin's device markers: no rank table was sent";
}

// A rank table is for the container that mounts it and root: 0640. It goes when its pod's chips are free
// (the kubelet's pod-resources no longer list them).
TEST_F(SchedulerE2E, TheRankTableIsMode0640AndGoesWhenThePodsChipsAreFreed) {
  ASSERT_GT(sched.start(), 0);
  sched.set_allocation_answer({2, 3}, 200,
                              {{"namespace", "ml"},
                               {"pod", "train-0"},
                               {"job", "train"},
                               {"env", {{"ASCEND_JOB", "train"}}},
                               {"ranktable_path", "/etc/ascend/hccl.json"},
                               {"ranktable", {{"version", "1.0"}}}});
  serve(config(sched.url()));
  kubelet->set_in_use({{"huawei.com/Ascend910", {"Ascend910-2", "Ascend910-3"}}});
  grpc::Status s;
  auto c = allocate({2, 3}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string folder = tmp / "ranktables/ml_train-0";
  const std::string file = folder + "/hccl.json";
  ASSERT_EQ(c.mounts(c.mounts_size() - 1).host_path(), folder);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_IRUSR | S_IWUSR | S_IRGRP)) << "0640";
  // While the kubelet lists the chips the table stays, past the grace period.
  past_grace_while_listed();
  EXPECT_TRUE(std::filesystem::exists(file));
  // The pod is gone.
  kubelet->set_in_use({});
  EXPECT_TRUE(testing::eventually([&] { return !std::filesystem::exists(folder); }))
      << "the rank table outlived its pod's chips";
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s)) << "and the chips are free";
}

// --ranktable-group: a job container whose user is not root reads its rank table through the group (0640
// root:<group>); the mode stays 0640.
TEST_F(SchedulerE2E, TheRankTableTakesTheConfiguredGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown to another group)";
  ASSERT_GT(sched.start(), 0);
  sched.set_allocation_answer({2, 3}, 200,
                              {{"namespace", "ml"},
                               {"pod", "train-0"},
                               {"job", "train"},
                               {"env", {{"ASCEND_JOB", "train"}}},
                               {"ranktable_path", "/etc/ascend/hccl.json"},
                               {"ranktable", {{"version", "1.0"}}}});
  Config cfg = config(sched.url());
  constexpr int kGroup = 4242;  // any group but root's and the test's own
  cfg.ranktable_group = kGroup;
  serve(cfg);
  grpc::Status s;
  auto c = allocate({2, 3}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "ranktables/ml_train-0/hccl.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, static_cast<gid_t>(kGroup));
  EXPECT_EQ(st.st_uid, 0U);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_IRUSR | S_IWUSR | S_IRGRP)) << "0640";
  // The folder the container sees it in: searchable by that group too.
  ASSERT_EQ(::stat((tmp / "ranktables/ml_train-0").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, static_cast<gid_t>(kGroup));
  EXPECT_EQ(st.st_uid, 0U);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_IRWXU | S_IRGRP | S_IXGRP)) << "0750";
}

// Reads `name` in the folder open as `dir`: what a process sees through a bind mount of that folder.
std::string read_at(int dir, const char* name) {
  UniqueFd fd(::openat(dir, name, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return "";
  std::string out;
  char buf[4096];
  for (ssize_t n = 0; (n = ::read(fd.get(), buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  return out;
}

// Issue 23: after a fault recovery the scheduler rewrites the job's rank table; a surviving pod's container
// must see the new one at the same path. The plugin asks GET /v1/jobs/{ns}/{job}/ranktable (the token as
// for its other calls) and renames the new table into the pod's folder. The container's mount is of the
// FOLDER, which keeps its inode, so the new entry shows through it; a mount of the old file would have kept
// the old file's inode and shown the old table for ever (not tested: it is how bind mounts work).
TEST_F(SchedulerE2E, ARankTableTheSchedulerRewritesReachesTheMountedFolderInPlace) {
  ASSERT_GT(sched.start(), 0);
  // Hand-written (HCCL rank table 1.0): job train's two pods; after the recovery rank 9 is on chip 6.
  const json before = json::parse(R"({"version": "1.0", "server_count": "2", "status": "completed",
      "server_list": [{"server_id": "node-0", "device": [
        {"device_id": "0", "device_ip": "192.168.100.101", "rank_id": "0"}]},
       {"server_id": "node-1", "device": [
        {"device_id": "2", "device_ip": "192.168.102.101", "rank_id": "8"},
        {"device_id": "3", "device_ip": "192.168.103.101", "rank_id": "9"}]}]})");
  const json after = json::parse(R"({"version": "1.0", "server_count": "2", "status": "completed",
      "server_list": [{"server_id": "node-0", "device": [
        {"device_id": "6", "device_ip": "192.168.102.102", "rank_id": "0"}]},
       {"server_id": "node-1", "device": [
        {"device_id": "2", "device_ip": "192.168.102.101", "rank_id": "8"},
        {"device_id": "3", "device_ip": "192.168.103.101", "rank_id": "9"}]}]})");
  sched.set_allocation_answer({2, 3}, 200,
                              {{"namespace", "ml"},
                               {"pod", "train-1"},
                               {"job", "train"},
                               {"env", {{"ASCEND_JOB", "train"}}},
                               {"ranktable_path", "/etc/ascend/hccl.json"},
                               {"ranktable", before}});
  sched.set_job_ranktable("ml", "train", before);
  serve(config(sched.url()));
  kubelet->set_in_use({{"huawei.com/Ascend910", {"Ascend910-2", "Ascend910-3"}}});  // the pod runs
  grpc::Status s;
  auto c = allocate({2, 3}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto& m = c.mounts(c.mounts_size() - 1);
  ASSERT_EQ(m.container_path(), "/etc/ascend");
  const std::string& folder = m.host_path();
  // What the kubelet's bind mount holds on to: the folder, by its inode.
  UniqueFd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir.valid()) << folder;
  struct stat dir0 {};
  struct stat file0 {};
  ASSERT_EQ(::fstat(dir.get(), &dir0), 0);
  ASSERT_EQ(::fstatat(dir.get(), "hccl.json", &file0, 0), 0);
  EXPECT_EQ(read_at(dir.get(), "hccl.json"), before.dump(4));

  // The refresh asks, with the token; the same table is not written again.
  auto ranktable_get = [](const SchedulerRequest& r) {
    return r.method == "GET" && r.path == "/v1/jobs/ml/train/ranktable";
  };
  SchedulerRequest got;
  ASSERT_TRUE(sched.wait_for(ranktable_get, 10s, &got));
  EXPECT_EQ(got.authorization, std::string("Bearer ") + kToken);
  ASSERT_TRUE(sched.wait_for(ranktable_get, 10s));
  struct stat same {};
  ASSERT_EQ(::fstatat(dir.get(), "hccl.json", &same, 0), 0);
  EXPECT_EQ(same.st_ino, file0.st_ino) << "an unchanged table was rewritten";

  // The recovery: the scheduler's table changes; the folder shows the new file.
  sched.set_job_ranktable("ml", "train", after);
  EXPECT_TRUE(testing::eventually([&] { return read_at(dir.get(), "hccl.json") == after.dump(4); }))
      << "the new table did not reach the folder";
  struct stat dir1 {};
  struct stat named {};
  struct stat file1 {};
  ASSERT_EQ(::fstat(dir.get(), &dir1), 0);
  ASSERT_EQ(::stat(folder.c_str(), &named), 0);
  ASSERT_EQ(::fstatat(dir.get(), "hccl.json", &file1, 0), 0);
  EXPECT_EQ(dir1.st_ino, dir0.st_ino);
  EXPECT_EQ(named.st_ino, dir0.st_ino)
      << "the folder the container's mount holds is the one the plugin names";
  EXPECT_EQ(named.st_dev, dir0.st_dev);
  EXPECT_NE(file1.st_ino, file0.st_ino) << "a new file renamed in: readers see the old table or the new one";
  EXPECT_EQ(file1.st_mode & 07777, static_cast<mode_t>(0640));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(folder), {}), 1) << "no temporary file left";

  // The job gone from the scheduler (404): the file stays as it is.
  sched.erase_job_ranktable("ml", "train");
  const auto erased = std::chrono::steady_clock::now();
  auto get_since_erased = [&](const SchedulerRequest& r) { return ranktable_get(r) && r.at > erased; };
  ASSERT_TRUE(sched.wait_for(get_since_erased, 10s));
  ASSERT_TRUE(sched.wait_for(get_since_erased, 10s)) << "the first pass after the 404 is over";
  EXPECT_EQ(read_at(dir.get(), "hccl.json"), after.dump(4));
}

// The client's side of GET /v1/jobs/{ns}/{job}/ranktable over real HTTP: the table as the grant carries it,
// 404 as ENOENT, and an answer longer than kMaxAnswerBytes refused without being kept.
TEST_F(SchedulerE2E, TheJobRankTableCallReadsAtMostItsBoundAndSaysWhenTheJobIsGone) {
  ASSERT_GT(sched.start(), 0);
  auto client = HttpScheduler::create(config(sched.url()), nullptr);
  ASSERT_TRUE(client.ok()) << client.error().message();
  const json table = {{"version", "1.0"}, {"server_count", "1"}};
  sched.set_job_ranktable("ml", "train", table);
  auto got = (*client)->job_ranktable("ml", "train");
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(*got, table.dump(4));
  auto gone = (*client)->job_ranktable("ml", "other");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ENOENT);
  sched.set_job_ranktable("ml", "huge", {{"version", std::string(kMaxAnswerBytes, 'x')}});
  auto huge = (*client)->job_ranktable("ml", "huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code(), EPROTO);
  EXPECT_NE(huge.error().message().find("longer than"), std::string::npos) << huge.error().message();
  const auto gets = sched.requests("GET");
  ASSERT_EQ(gets.size(), 3U);
  EXPECT_EQ(gets[0].path, "/v1/jobs/ml/train/ranktable");
  EXPECT_EQ(gets[0].authorization, std::string("Bearer ") + kToken);
}

TEST_F(SchedulerE2E, AllocateOfAPodTheSchedulerDoesNotKnowIsAnsweredAsToday) {
  ASSERT_GT(sched.start(), 0);
  serve(config(sched.url()));
  grpc::Status s;
  auto c = allocate({1, 0}, &s);  // the fake answers 404 for chips it has no answer for
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(envs_of(c), (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "0,1"}}));
  ASSERT_EQ(c.mounts_size(), 2);
  EXPECT_EQ(c.mounts(0).container_path(), "/var/run/ascend-container-devices/0");
  EXPECT_EQ(c.mounts(1).container_path(), "/var/run/ascend-container-devices/1");
  ASSERT_EQ(sched.requests("POST").size(), 1U);
  EXPECT_EQ(sched.requests("POST")[0].json(), json::parse(R"({"chips": [0, 1]})"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "ranktables")) << "no rank table for an unknown pod";
}

TEST_F(SchedulerE2E, A409FailsTheAllocateWithTheSchedulersReason) {
  ASSERT_GT(sched.start(), 0);
  const std::string reason =
      "pod default/train-2 has chips 2,4 reserved on node-1, not 2,3 (chip 4 is unhealthy)";
  sched.set_allocation_answer({2, 3}, 409, {{"error", reason}});
  serve(config(sched.url()));
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s));
  grpc::Status s;
  allocate({2, 3}, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_EQ(s.error_message(), "allocate huawei.com/Ascend910: the scheduler refuses chips 2,3: " + reason);
  // Nothing stays claimed: the kubelet frees the devices of a failed Allocate.
  for (const auto& chip : daemon->plugin().inventory().chips) EXPECT_FALSE(chip.in_use) << chip.phy_id;
  // The chips can be allocated again (here to a pod the scheduler does not know).
  sched.set_allocation_answer({2, 3}, 404, {{"error", "no pending reservation"}});
  allocate({2, 3}, &s);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// ---- a scheduler that is not there, or hangs ------------------------------------------------------------

TEST_F(SchedulerE2E, AnUnreachableSchedulerChangesNothing) {
  const int port = sched.start();
  sched.stop();  // connections to it are refused
  serve(config("http://127.0.0.1:" + std::to_string(port)));
  auto w = kubelet->watch(kEndpoint);
  ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s));
  ASSERT_TRUE(emu.set_fault(6, 0x80E18402, npu::Health::kCritical).ok());
  ASSERT_TRUE(w->wait_for(
      [](const auto& r) {
        for (const auto& d : r.devices())
          if (d.id() == "Ascend910-6") return d.health() == "Unhealthy";
        return false;
      },
      2s));
  EXPECT_EQ(preferred({0, 1, 2, 3, 4, 5, 6, 7}, 8), ids({0, 1, 2, 3, 4, 5, 6, 7}));
  grpc::Status s;
  auto c = allocate({3}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(envs_of(c), (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "3"}}));
  EXPECT_EQ(c.mounts_size(), 1);
}

TEST_F(SchedulerE2E, AHangingSchedulerDelaysOnlyTheCallThatWaitsForIt) {
  ASSERT_GT(sched.start(), 0);
  serve(config(sched.url()));
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s));
  sched.hold();  // the scheduler records each request and answers none until released
  auto w = kubelet->watch(kEndpoint);
  ASSERT_TRUE(w->wait_for([](const auto& r) { return r.devices_size() == 8; }, 5s));

  grpc::Status s;
  v1beta1::ContainerAllocateResponse c;
  std::atomic<bool> answered{false};
  std::thread call([&] {
    c = allocate({1}, &s);
    answered = true;
  });
  ASSERT_TRUE(testing::eventually([&] { return sched.held() > 0; }));  // the Allocate waits for the scheduler
  ASSERT_TRUE(emu.set_fault(2, 0x80E18402, npu::Health::kCritical).ok());
  const bool seen = w->wait_for(
      [](const auto& r) {
        for (const auto& d : r.devices())
          if (d.id() == "Ascend910-2") return d.health() == "Unhealthy";
        return false;
      },
      testing::kEventually);
  EXPECT_TRUE(seen) << "ListAndWatch waited for the scheduler";
  // Allocate gives up on the scheduler (its 1 s timeout) and answers as without one; the scheduler never
  // answered it (a bound on the time would fail on a busy machine: the hold makes the wait endless instead).
  const bool gave_up = testing::eventually([&] { return answered.load(); });
  if (!gave_up) sched.release();
  call.join();
  ASSERT_TRUE(gave_up) << "Allocate waited for a scheduler that does not answer";
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(envs_of(c), (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "1"}}));

  // GetPreferredAllocation gives up too (after 500 ms) while the scheduler still holds every answer.
  EXPECT_EQ(preferred({0, 1, 3, 4, 5, 6, 7}, 1).size(), 1U);
  EXPECT_GT(sched.held(), 0);
  sched.release();
}

TEST_F(SchedulerE2E, AWrongTokenIsRefusedAndNothingIsTaken) {
  ASSERT_GT(sched.start(), 0);
  sched.require_token("another-token");
  sched.set_allocation_answer(
      {0}, 200, {{"namespace", "default"}, {"pod", "p"}, {"job", "j"}, {"env", {{"ASCEND_JOB", "j"}}}});
  serve(config(sched.url()));
  ASSERT_TRUE(sched.wait_for([](const auto& r) { return r.method == "PUT"; }, 5s));
  grpc::Status s;
  auto c = allocate({0}, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(envs_of(c).count("ASCEND_JOB"), 0U) << "the scheduler answered 403, not the grant";
}

// ---- https ----------------------------------------------------------------------------------------------

// A self-signed certificate for 127.0.0.1: <tmp>/<name>.pem and <name>-key.pem.
bool self_signed(const TempDir& tmp, const std::string& name) {
  auto gen = testing::run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                   "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                   "-keyout", tmp / (name + "-key.pem"), "-out", tmp / (name + ".pem")});
  return gen.exit_code == 0;
}

TEST_F(SchedulerE2E, HttpsIsVerifiedAgainstTheSchedulerCa) {
  auto gen = testing::run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                   "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                   "-keyout", tmp / "key.pem", "-out", tmp / "cert.pem"});
  if (gen.exit_code != 0) GTEST_SKIP() << "openssl cannot make a test certificate: " << gen.err;
  ASSERT_GT(sched.start(0, tmp / "cert.pem", tmp / "key.pem"), 0);
  ASSERT_EQ(sched.url().rfind("https://", 0), 0U);
  Config cfg = config(sched.url());
  cfg.scheduler_ca_file = tmp / "cert.pem";
  serve(cfg);
  SchedulerRequest got;
  ASSERT_TRUE(sched.wait_for(put_of(inventory({}, {})), 5s, &got));
  EXPECT_EQ(got.authorization, std::string("Bearer ") + kToken);
}

TEST_F(SchedulerE2E, HttpsWithAnUnknownCaSendsNothing) {
  auto gen = testing::run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                   "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                   "-keyout", tmp / "key.pem", "-out", tmp / "cert.pem"});
  if (gen.exit_code != 0) GTEST_SKIP() << "openssl cannot make a test certificate: " << gen.err;
  ASSERT_GT(sched.start(0, tmp / "cert.pem", tmp / "key.pem"), 0);
  Config cfg = config(sched.url());  // no CA file: the system's CAs do not know this certificate
  cfg.metrics_addr = "127.0.0.1:0";
  serve(cfg);
  ASSERT_TRUE(reports_failed(2)) << "the reporter tried";
  EXPECT_TRUE(sched.requests().empty()) << "the plugin sent its token to a server it could not verify";
  grpc::Status s;
  allocate({0}, &s);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// ---- the binary -----------------------------------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& args, const std::string& log,
            const std::vector<std::string>& env) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("NODE_NAME=")) continue;
    envp.push_back(*e);
  }
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  pid_t pid = -1;
  ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int stop_and_wait(pid_t pid) {
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(SchedulerE2E, BinaryTakesTheSchedulerFlagsAndTheNodeNameFromTheEnvironment) {
  ASSERT_GT(sched.start(), 0);
  kubelet = std::make_unique<FakeKubelet>(dir);
  kubelet->start();
  const std::string bin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
  {
    std::ofstream f(tmp / "plugin.yaml");
    f << "kubelet-socket-dir: " << dir << "\nhost-root: " << root << "\nscheduler-url: " << sched.url()
      << "\nscheduler-token-file: " << (tmp / "token") << "\nranktable-dir: " << (tmp / "rt") << "\n";
  }
  pid_t pid = spawn({bin, "--config", tmp / "plugin.yaml"}, tmp / "a.log", {"NODE_NAME=node-from-env"});
  ASSERT_GT(pid, 0);
  SchedulerRequest got;
  EXPECT_TRUE(sched.wait_for(put_of(inventory({}, {})), 10s, &got)) << "see " << (tmp / "a.log");
  EXPECT_EQ(got.path, "/v1/nodes/node-from-env");
  EXPECT_EQ(got.authorization, std::string("Bearer ") + kToken);
  EXPECT_EQ(stop_and_wait(pid), 0);

  // Flags win over the file and the environment.
  pid = spawn({bin, "--config", tmp / "plugin.yaml", "--node-name", "node-flag"}, tmp / "b.log",
              {"NODE_NAME=node-from-env"});
  EXPECT_TRUE(sched.wait_for([](const auto& r) { return r.path == "/v1/nodes/node-flag"; }, 10s))
      << "see " << (tmp / "b.log");
  EXPECT_EQ(stop_and_wait(pid), 0);

  auto help = testing::run_command({bin, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag :
       {"--scheduler-url", "--node-name", "--scheduler-token-file", "--scheduler-ca-file", "--ranktable-dir"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  auto bad = testing::run_command(
      {bin, "--host-root", root, "--kubelet-socket-dir", dir, "--scheduler-url", "sched:8080"});
  EXPECT_EQ(bad.exit_code, 2) << "bad usage, as --help says";
  EXPECT_NE(bad.err.find("--scheduler-url"), std::string::npos) << bad.err;
}

// An IPv4 address of this machine that is not loopback ("" when it has none).
std::string network_address() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string out;
  for (ifaddrs* a = all; a != nullptr && out.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_UP) == 0 ||
        (a->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    out = text;
  }
  ::freeifaddrs(all);
  return out;
}

std::size_t lines_of(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST_F(SchedulerE2E, BinaryRefusesPlainHttpToTheNetworkUnlessTheInsecureFlagSaysSo) {
  const std::string bin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
  const std::vector<std::string> base = {
      bin,           "--host-root", root,    "--kubelet-socket-dir", dir, "--scheduler-token-file",
      tmp / "token", "--node-name", "node-1"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  // A name is the network even when it would resolve to this machine.
  for (const char* url : {"http://ascend-scheduler.kube-system.svc:8888", "http://10.0.0.1:8888",
                          "http://127.0.0.1.nip.io:8888", "http://[fd00::1]:8888"}) {
    auto r = testing::run_command(with({"--scheduler-url", url}));
    EXPECT_EQ(r.exit_code, 2) << url << ": " << r.err;
    EXPECT_EQ(lines_of(r.err), 1U) << "one line: " << r.err;
    EXPECT_EQ(r.err.rfind("ascend-device-plugin: --scheduler-url ", 0), 0U) << r.err;
    EXPECT_NE(r.err.find("--insecure-scheduler-http"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + kEndpoint)) << "refused before serving anything";

  kubelet = std::make_unique<FakeKubelet>(dir);
  kubelet->start();
  // With the flag it starts (the scheduler need not be there: the plugin serves the kubelet meanwhile).
  pid_t pid =
      spawn(with({"--scheduler-url", "http://ascend-scheduler.invalid:8888", "--insecure-scheduler-http"}),
            tmp / "insecure.log", {});
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(kubelet->wait_registrations(1, 10s)) << "see " << (tmp / "insecure.log");
  EXPECT_EQ(stop_and_wait(pid), 0);

  // And it does send to a scheduler on the network, token and all; without the flag, nothing.
  const std::string ip = network_address();
  if (ip.empty()) GTEST_SKIP() << "this machine has no IPv4 address but loopback";
  FakeScheduler remote;
  remote.require_token(kToken);
  ASSERT_GT(remote.start(0, "", "", ip), 0) << ip;
  auto refused = testing::run_command(with({"--scheduler-url", remote.url()}));
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  pid = spawn(with({"--scheduler-url", remote.url(), "--insecure-scheduler-http"}), tmp / "remote.log", {});
  ASSERT_GT(pid, 0);
  SchedulerRequest got;
  EXPECT_TRUE(remote.wait_for(put_of(inventory({}, {})), 10s, &got)) << "see " << (tmp / "remote.log");
  EXPECT_EQ(got.authorization, std::string("Bearer ") + kToken);
  EXPECT_EQ(stop_and_wait(pid), 0);
  EXPECT_EQ(remote.requests().size(), remote.requests("PUT").size()) << "only reports: nothing was refused";
}

TEST_F(SchedulerE2E, BinaryFailsClosedWithOneLineOnAWrongCaAndRefusesACaFileWithoutACertificate) {
  if (!self_signed(tmp, "server") || !self_signed(tmp, "other"))
    GTEST_SKIP() << "openssl cannot make certificates";
  ASSERT_GT(sched.start(0, tmp / "server.pem", tmp / "server-key.pem"), 0);
  kubelet = std::make_unique<FakeKubelet>(dir);
  kubelet->start();
  const std::string bin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
  const std::vector<std::string> args = {bin,
                                         "--host-root",
                                         root,
                                         "--kubelet-socket-dir",
                                         dir,
                                         "--scheduler-url",
                                         sched.url(),
                                         "--scheduler-token-file",
                                         tmp / "token",
                                         "--node-name",
                                         "node-1",
                                         "--scheduler-ca-file",
                                         tmp / "other.pem"};
  pid_t pid = spawn(args, tmp / "wrong-ca.log", {});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(kubelet->wait_registrations(1, 10s)) << "the plugin serves the kubelet alone";
  std::this_thread::sleep_for(1500ms);  // a few report attempts (100 ms backoff, doubling)
  EXPECT_EQ(stop_and_wait(pid), 0);
  EXPECT_TRUE(sched.requests().empty()) << "the token went to a server the CA does not vouch for";
  auto log = read_file(tmp / "wrong-ca.log");
  ASSERT_TRUE(log.ok());
  std::size_t said = 0;
  std::istringstream lines(*log);
  for (std::string line; std::getline(lines, line);)
    said += line.find("certificate is not trusted") != std::string::npos;
  EXPECT_EQ(said, 1U) << "one line says why, not one per attempt:\n" << *log;

  // A CA file that holds no certificate would refuse every server: refused at start, one line.
  ASSERT_TRUE(atomic_replace(tmp / "empty.pem", "not a certificate\n").ok());
  auto bad = args;
  bad.back() = tmp / "empty.pem";
  auto r = testing::run_command(bad);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(lines_of(r.err), 1U) << r.err;
  EXPECT_NE(r.err.find("--scheduler-ca-file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds no PEM certificate"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ascend::plugin
