// The plugin's side of the scheduler contract without a socket: the URL, the wire JSON, the pure planning
// (inventory, reservation choice, env and rank-table mount), the configuration, and the Plugin and the
// Reporter driven through a recording SchedulerApi.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <grpcpp/grpcpp.h>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "ascend/common/fs.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/config.h"
#include "ascend/plugin/endpoint.h"
#include "ascend/plugin/options.h"
#include "ascend/plugin/plugin.h"
#include "ascend/plugin/reporter.h"
#include "ascend/plugin/scheduler_client.h"
#include "ascend/plugin/scheduler_plan.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "eventually.h"
#include "grpc_allocate.h"
#include "guarded_capture.h"
#include "test_clock.h"
#include "test_dir.h"

namespace ascend::plugin {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::eventually;
using testing::kEventually;
using testing::TestClock;

npu::HostState profile(const char* name) {
  auto p = npu::builtin_profile(name);
  EXPECT_TRUE(p.ok()) << name;
  npu::HostState s = *p;
  s.majors = {240, 241, 242, 243, 244};
  return s;
}

const ResourceSpec kChips{"huawei.com/Ascend910", DeviceKind::kChip, ""};

// ---- the URL --------------------------------------------------------------------------------------------

TEST(SchedulerUrl, ParsesOriginAndPrefixAndRefusesTheRest) {
  struct Case {
    const char* url;
    const char* origin;  // nullptr: refused
    const char* prefix;
    bool https;
    const char* host;
  };
  const Case cases[] = {
      {"http://sched:8080", "http://sched:8080", "", false, "sched"},
      {"https://10.0.0.1:8443/", "https://10.0.0.1:8443", "", true, "10.0.0.1"},
      {"http://sched/ascend/", "http://sched", "/ascend", false, "sched"},
      {"http://[::1]:9000/x/y", "http://[::1]:9000", "/x/y", false, "::1"},
      {"http://ascend-scheduler.kube-system.svc", "http://ascend-scheduler.kube-system.svc", "", false,
       "ascend-scheduler.kube-system.svc"},
      {"sched:8080", nullptr, nullptr, false, nullptr},
      {"ftp://sched", nullptr, nullptr, false, nullptr},
      {"http://", nullptr, nullptr, false, nullptr},
      {"http://:80", nullptr, nullptr, false, nullptr},
      {"http://h:0", nullptr, nullptr, false, nullptr},
      {"http://h:70000", nullptr, nullptr, false, nullptr},
      {"http://h:8a", nullptr, nullptr, false, nullptr},
      {"http://h:", nullptr, nullptr, false, nullptr},
      {"http://user@h", nullptr, nullptr, false, nullptr},
      {"http://h/?x=1", nullptr, nullptr, false, nullptr},
      {"http://[::1:80", nullptr, nullptr, false, nullptr},
  };
  for (const auto& c : cases) {
    auto u = parse_scheduler_url(c.url);
    if (c.origin == nullptr) {
      EXPECT_FALSE(u.ok()) << c.url;
      if (!u.ok()) {
        EXPECT_EQ(u.error().code(), EINVAL);
      }
      continue;
    }
    ASSERT_TRUE(u.ok()) << c.url << ": " << u.error().message();
    EXPECT_EQ(*u, (SchedulerUrl{c.origin, c.prefix, c.https, c.host})) << c.url;
  }
}

TEST(SchedulerUrl, LoopbackIsOnly127Slash8ColonColon1AndLocalhost) {
  for (const char* h : {"127.0.0.1", "127.255.3.4", "127.0.0.0", "localhost", "LocalHost", "::1",
                        "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(loopback_host(h)) << h;
  }
  // Names that are not literally loopback count as the network, whatever they resolve to today; so do the
  // short and hex forms of 127.0.0.1 that inet_aton (not inet_pton) would take.
  for (const char* h : {"128.0.0.1",
                        "126.255.255.255",
                        "10.0.0.1",
                        "0.0.0.0",
                        "::",
                        "::2",
                        "::ffff:10.0.0.1",
                        "fe80::1",
                        "127.1",
                        "0x7f.0.0.1",
                        "2130706433",
                        "127.0.0.1.",
                        "127.0.0.1.nip.io",
                        "localhost.",
                        "localhost.localdomain",
                        "my.localhost",
                        "ip6-localhost",
                        "sched",
                        "",
                        "[::1]"}) {
    EXPECT_FALSE(loopback_host(h)) << h;
  }
}

// ---- the wire -------------------------------------------------------------------------------------------

TEST(SchedulerWire, InventoryAndAllocationBodiesAreTheContractsJson) {
  InventoryReport r{"huawei.com/Ascend910", {{0, true, false}, {1, false, true}}};
  EXPECT_EQ(json::parse(inventory_body(r)), json::parse(R"({"resource": "huawei.com/Ascend910",
      "chips": [{"phy_id": 0, "healthy": true, "in_use": false}, {"phy_id": 1, "healthy": false, "in_use": true}]})"));
  EXPECT_EQ(json::parse(allocation_body({0, 1, 2, 3})), json::parse(R"({"chips": [0, 1, 2, 3]})"));
}

TEST(SchedulerWire, ReservationsParseAndBadBodiesAreErrorsNotExceptions) {
  auto ok = parse_reservations(R"({"node": "node-1", "reservations": [
      {"namespace": "default", "pod": "train-1", "job": "train", "chips": [0, 1, 2, 3]},
      {"namespace": "ml", "pod": "solo", "job": "", "chips": [7]}]})");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  ASSERT_EQ(ok->size(), 2U);
  EXPECT_EQ((*ok)[0], (Reservation{"default", "train-1", "train", {0, 1, 2, 3}}));
  EXPECT_EQ((*ok)[1], (Reservation{"ml", "solo", "", {7}}));
  EXPECT_TRUE(parse_reservations(R"({"node": "n", "reservations": []})")->empty());

  const char* bad[] = {
      "",
      "not json",
      "[]",
      R"({"node": "n"})",
      R"({"reservations": {}})",
      R"({"reservations": [{"pod": "p", "chips": [0]}]})",
      R"({"reservations": [{"namespace": "d", "pod": "p", "chips": "0,1"}]})",
      R"({"reservations": [{"namespace": "d", "pod": "p", "chips": ["0"]}]})",
      R"({"reservations": [{"namespace": 1, "pod": "p", "chips": [0]}]})",
  };
  for (const char* b : bad) {
    auto r = parse_reservations(b);
    EXPECT_FALSE(r.ok()) << b;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), EPROTO) << b;
    }
  }
}

TEST(SchedulerWire, GrantCarriesEnvAndTheRankTableDumpedWithIndentFour) {
  const json table = {{"version", "1.0"}, {"server_count", "1"}, {"server_list", json::array()}};
  json body = {{"namespace", "default"},
               {"pod", "train-1"},
               {"job", "train"},
               {"env", {{"ASCEND_JOB", "train"}, {"RANK_SIZE", "32"}}},
               {"ranktable_path", "/etc/ascend/hccl.json"},
               {"ranktable", table}};
  auto g = parse_grant(body.dump());
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->pod_namespace, "default");
  EXPECT_EQ(g->pod, "train-1");
  EXPECT_EQ(g->job, "train");
  EXPECT_EQ(g->env, (std::map<std::string, std::string>{{"ASCEND_JOB", "train"}, {"RANK_SIZE", "32"}}));
  EXPECT_EQ(g->ranktable_path, "/etc/ascend/hccl.json");
  EXPECT_EQ(g->ranktable, table.dump(4));

  auto solo = parse_grant(R"({"namespace": "default", "pod": "solo", "job": "", "env": {}})");
  ASSERT_TRUE(solo.ok()) << solo.error().message();
  EXPECT_TRUE(solo->env.empty());
  EXPECT_TRUE(solo->ranktable.empty());
  EXPECT_TRUE(solo->ranktable_path.empty());

  const char* bad[] = {
      "{",
      R"({"pod": "p", "env": {}})",
      R"({"namespace": "d", "pod": "p", "env": {"A": 1}})",
      R"({"namespace": "d", "pod": "p", "env": [], "ranktable": {}})",
      R"({"namespace": "d", "pod": "p", "env": {}, "ranktable_path": "/etc/ascend/hccl.json"})",
      R"({"namespace": "d", "pod": "p", "env": {}, "ranktable_path": "/x", "ranktable": "text"})",
      R"({"namespace": "d", "pod": "p", "env": {}, "ranktable_path": 3, "ranktable": {}})",
  };
  for (const char* b : bad) {
    auto r = parse_grant(b);
    EXPECT_FALSE(r.ok()) << b;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), EPROTO) << b;
    }
  }
}

TEST(SchedulerWire, ErrorTextIsTheErrorFieldElseTheBodyCutShort) {
  EXPECT_EQ(error_text(R"({"error": "chip 3 of node-1 is unhealthy"})"), "chip 3 of node-1 is unhealthy");
  EXPECT_EQ(error_text("upstream\nfailure"), "upstream failure");
  EXPECT_EQ(error_text(""), "(no body)");
  EXPECT_EQ(error_text(std::string(300, 'x')), std::string(200, 'x') + "...");
}

TEST(SchedulerWire, OnlyAnAbsentSchedulerIsRetriedSoon) {
  const std::pair<int, bool> cases[] = {{ECONNREFUSED, true}, {ETIMEDOUT, true}, {EIO, true},
                                        {EAGAIN, true},       {EINVAL, false},   {EACCES, false},
                                        {ENOENT, false},      {EBUSY, false},    {EPROTO, false}};
  for (auto [code, away] : cases) EXPECT_EQ(scheduler_unavailable(Error(code, "x")), away) << code;
}

// ---- planning -------------------------------------------------------------------------------------------

TEST(SchedulerPlan, InventoryReportsHealthAndUse) {
  npu::HostState s = profile("atlas800t-a2");
  s.chips[2].faults.push_back({0x80000001, npu::Health::kWarning});   // sub-health: still healthy
  s.chips[3].faults.push_back({0x80E01801, npu::Health::kCritical});  // unhealthy
  s.chips[5].faults.push_back({0x84000001, npu::Health::kAlarm});     // unhealthy
  auto v = npu::plan_vnpu(s, 6, "vir10_3c_32g", std::nullopt);        // holds a vNPU: not whole
  ASSERT_TRUE(v.ok()) << v.error().message();
  s.vnpus.push_back(*v);
  Ledger ledger;
  ASSERT_TRUE(ledger.claim_whole({{0, "Ascend910-0"}, {1, "Ascend910-1"}}, Clock::now()).ok());
  ledger.add_promise({7, "vir05_1c_16g", {"npu-core-7-0"}, Clock::now()});  // cores promised: not whole

  const InventoryReport want{"huawei.com/Ascend910",
                             {{0, true, true},
                              {1, true, true},
                              {2, true, false},
                              {3, false, false},
                              {4, true, false},
                              {5, false, false},
                              {6, true, true},
                              {7, true, true}}};
  InventoryReport got = inventory_report(s, kChips, ledger);
  // Each chip's load for the scheduler's dashboard: the profile's idle values (npu-smi-sim/profiles/
  // atlas800t-a2.json, chip 0: 65536 MB of HBM, 3318 MB used; AICore 0 %); the rest compared without them.
  ASSERT_EQ(got.chips.size(), 8u);
  EXPECT_EQ(got.chips[0].aicore_pct, 0);
  EXPECT_EQ(got.chips[0].hbm_total_mb, 65536);
  EXPECT_EQ(got.chips[0].hbm_used_mb, 3318);
  for (auto& c : got.chips) c.aicore_pct = -1, c.hbm_used_mb = -1, c.hbm_total_mb = -1;
  EXPECT_EQ(got, want);
}

TEST(SchedulerPlan, ChipIdsAndPhysMapBothWays) {
  EXPECT_EQ(chip_ids(kChips, {3, 1, 2}),
            (std::vector<std::string>{"Ascend910-1", "Ascend910-2", "Ascend910-3"}));
  const ResourceSpec custom{"example.com/npu", DeviceKind::kChip, ""};
  EXPECT_EQ(chip_ids(custom, {0}), (std::vector<std::string>{"npu-0"}));
  const auto table = device_table(profile("atlas800t-a2"), kChips, Ledger{});
  EXPECT_EQ(chip_phys(table, {"Ascend910-7", "Ascend910-0", "Ascend910-99"}), (std::vector<int>{0, 7}));
}

TEST(SchedulerPlan, PickReservationTakesTheFirstThatFitsInsideAvailable) {
  const std::vector<Reservation> rs = {
      {"default", "a", "j", {6, 7}},
      {"default", "b", "j", {4, 5, 6, 7}},
      {"default", "c", "k", {0, 1, 2, 3}},
      {"default", "dup", "k", {1, 1, 2, 2}},
  };
  auto ids = [](std::vector<int> phys) { return chip_ids(kChips, std::move(phys)); };
  const auto all = ids({0, 1, 2, 3, 4, 5, 6, 7});
  struct Case {
    std::vector<std::string> available;
    std::vector<std::string> must;
    int size;
    std::set<std::size_t> skip;
    std::optional<std::size_t> want;
  };
  const Case cases[] = {
      {all, {}, 4, {}, 1},                         // the first of size 4, not the first in the list
      {all, {}, 2, {}, 0},                         // size picks
      {all, {}, 3, {}, std::nullopt},              // no reservation of that size
      {ids({0, 1, 2, 3, 4, 5, 6}), {}, 4, {}, 2},  // b has chip 7, which is not available
      {ids({0, 1, 2, 4, 5, 6, 7}), {}, 4, {}, 1},
      {ids({0, 1, 2, 5, 6, 7}), {}, 4, {}, std::nullopt},
      {all, ids({0}), 4, {}, 2},  // must-include 0: only c holds it
      {all, ids({0, 4}), 4, {}, std::nullopt},
      {all, {}, 4, {1}, 2},  // b already answered another container
      {all, {}, 1, {}, std::nullopt},
  };
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const auto& c = cases[i];
    EXPECT_EQ(pick_reservation(rs, kChips, c.available, c.must, c.size, c.skip), c.want) << "case " << i;
  }
  EXPECT_EQ(pick_reservation({}, kChips, all, {}, 4), std::nullopt);
}

TEST(SchedulerPlan, RankTableFolderIsNamedAfterThePodAndStaysInsideTheDir) {
  const std::pair<std::pair<const char*, const char*>, const char*> cases[] = {
      {{"default", "train-1"}, "/rt/default_train-1"},
      {{"ml-team", "job.a-0"}, "/rt/ml-team_job.a-0"},
      {{"default", "../../etc/passwd"}, nullptr},
      {{"default", "a/b"}, nullptr},
      {{"..", "x"}, nullptr},
      {{"default", ""}, nullptr},
      {{"Default", "x"}, nullptr},
      {{"default", "-x"}, nullptr},
      {{"default", "x_y"}, nullptr},
  };
  for (const auto& [names, want] : cases) {
    Grant g;
    g.pod_namespace = names.first;
    g.pod = names.second;
    g.ranktable_path = "/etc/ascend/hccl.json";
    auto p = ranktable_host_paths("/rt", g);
    if (want == nullptr) {
      EXPECT_FALSE(p.ok()) << names.first << "/" << names.second;
      continue;
    }
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->folder, want);
    EXPECT_EQ(p->file, std::string(want) + "/hccl.json");
    EXPECT_EQ(p->legacy_file, std::string(want) + ".json") << "where earlier versions wrote the file";
  }
  Grant g{"default", "p", "", {}, "/opt/job/rank_table.json", "{}"};
  EXPECT_EQ(*ranktable_host_paths("/rt/", g),
            (RanktableHostPaths{"/rt/default_p", "/rt/default_p/rank_table.json", "/rt/default_p.json"}));
  g.ranktable_path = "/hccl.json";
  EXPECT_FALSE(ranktable_host_paths("/rt", g).ok()) << "no folder to mount";
}

// The container sees the folder of ranktable_path mounted: its folder and file name, and the paths whose
// folder is "/", the container's system, or not a clean absolute path.
TEST(SchedulerPlan, RankTableMountPointIsTheFolderOfTheContainerPath) {
  const std::pair<const char*, RanktableMountPoint> good[] = {
      {"/etc/ascend/hccl.json", {"/etc/ascend", "hccl.json"}},
      {"/user/config/jobs/rank_table_file.json", {"/user/config/jobs", "rank_table_file.json"}},
      {"/job/hccl.json", {"/job", "hccl.json"}},
      {"/etc/ascend/.hccl", {"/etc/ascend", ".hccl"}},
      {"/usr/local/Ascend/hccl.json", {"/usr/local/Ascend", "hccl.json"}},
  };
  for (const auto& [path, want] : good) {
    auto m = ranktable_mount_point(path);
    ASSERT_TRUE(m.ok()) << path << ": " << m.error().message();
    EXPECT_EQ(*m, want) << path;
  }
  const char* bad[] = {
      "",  // not absolute
      "hccl.json",
      "etc/ascend/hccl.json",
      "/hccl.json",  // the folder would be "/"
      "/",
      "/etc/hccl.json",  // would hide the image's /etc
      "/usr/hccl.json",
      "/tmp/hccl.json",
      "/var/hccl.json",
      "/lib64/hccl.json",
      "/proc/self/hccl.json",  // kernel filesystems
      "/sys/fs/hccl.json",
      "/dev/shm/hccl.json",
      "/etc/ascend/",  // no file name
      "/etc/ascend/.",
      "/etc/ascend/..",
      "/etc/../ascend/hccl.json",
      "/etc/./ascend/hccl.json",
      "/etc//ascend/hccl.json",
      "//etc/ascend/hccl.json",
  };
  for (const char* path : bad) {
    auto m = ranktable_mount_point(path);
    EXPECT_FALSE(m.ok()) << path;
    if (!m.ok()) {
      EXPECT_EQ(m.error().code(), EPROTO) << path;
    }
  }
  EXPECT_FALSE(ranktable_mount_point(std::string("/etc/ascend/hccl\0.json", 22)).ok()) << "NUL";
  EXPECT_FALSE(ranktable_mount_point("/etc/ascend/" + std::string(256, 'x')).ok()) << "over NAME_MAX";
  EXPECT_TRUE(ranktable_mount_point("/etc/ascend/" + std::string(255, 'x')).ok());
  // The error names the path and says what to do.
  auto e = ranktable_mount_point("/etc/hccl.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("\"/etc/hccl.json\""), std::string::npos) << e.error().message();
  EXPECT_NE(e.error().message().find("/etc/ascend"), std::string::npos) << e.error().message();
}

// The launch env, as docs/device-plugin.md lists it for the scheduler's grants ("With the scheduler
// extender").
const std::set<std::string> kDocumentedLaunchEnv = {"ASCEND_JOB", "RANK_TABLE_FILE", "RANK_SIZE",
                                                    "WORLD_SIZE", "RANK_START",      "NODE_RANK",
                                                    "NNODES",     "NPROC_PER_NODE"};

TEST(SchedulerPlan, TheLaunchEnvAllowListIsTheDocumentedOne) {
  EXPECT_EQ(std::set<std::string>(kLaunchEnv.begin(), kLaunchEnv.end()), kDocumentedLaunchEnv);
  for (const auto& n : kDocumentedLaunchEnv) EXPECT_TRUE(launch_env_name(n)) << n;
  for (const char* n : {"LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "ASCEND_RUNTIME_OPTIONS",
                        "ASCEND_VISIBLE_DEVICES", "ASCEND_VNPU_SPECS", "ASCEND_JOBS", "RANK", "RANK_ID",
                        "rank_size", "RANK_SIZE ", "", "MASTER_ADDR"}) {
    EXPECT_FALSE(launch_env_name(n)) << n;
  }
}

TEST(SchedulerPlan, WithGrantAddsTheLaunchEnvAndARankTableMountAndKeepsThePluginsEntries) {
  ContainerAllocation base;
  base.envs = {{"ASCEND_VISIBLE_DEVICES", "4,5"}};
  base.mounts = {{"/var/run/ascend-container-devices/4", "/dev/null", true}};
  Grant g{"default",
          "train-1",
          "train",
          {{"ASCEND_JOB", "train"}, {"RANK_SIZE", "8"}, {"ASCEND_VISIBLE_DEVICES", "0,1"}},
          "/etc/ascend/hccl.json",
          "{}"};
  auto a = with_grant(base, g, "/rt/default_train-1");
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->allocation.envs,
            (std::map<std::string, std::string>{
                {"ASCEND_VISIBLE_DEVICES", "4,5"}, {"ASCEND_JOB", "train"}, {"RANK_SIZE", "8"}}));
  EXPECT_EQ(a->dropped, std::vector<std::string>{"\"ASCEND_VISIBLE_DEVICES\""});
  ASSERT_EQ(a->allocation.mounts.size(), 2U);
  EXPECT_EQ(a->allocation.mounts[0], base.mounts[0]);
  EXPECT_EQ(a->allocation.mounts[1], (MountSpec{"/etc/ascend", "/rt/default_train-1", true}))
      << "the folder: a file mount would keep the first file's inode";

  // No job: nothing to add.
  auto solo = with_grant(base, Grant{"default", "solo", "", {}, "", ""}, "");
  ASSERT_TRUE(solo.ok());
  EXPECT_EQ(solo->allocation.envs, base.envs);
  EXPECT_EQ(solo->allocation.mounts, base.mounts);
  EXPECT_TRUE(solo->dropped.empty());

  const std::pair<std::map<std::string, std::string>, std::string> bad[] = {
      {{}, "etc/ascend/hccl.json"}, {{}, "/etc/../../host/hccl.json"}, {{}, "/.."}, {{}, "/hccl.json"},
      {{}, "/etc/hccl.json"},
  };
  for (const auto& [env, path] : bad) {
    auto r = with_grant(base, Grant{"default", "p", "j", env, path, "{}"}, "/rt/default_p");
    EXPECT_FALSE(r.ok()) << path;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), EPROTO);
    }
  }
}

TEST(SchedulerPlan, WithGrantDropsEveryNameOutsideTheLaunchEnvAndStillSucceeds) {
  ContainerAllocation base;
  base.envs = {{"ASCEND_VISIBLE_DEVICES", "3"}};
  std::map<std::string, std::string> env;
  for (const auto& n : kDocumentedLaunchEnv) env[n] = "v-" + n;
  const std::map<std::string, std::string> hostile = {
      {"LD_PRELOAD", "/tmp/evil.so"},
      {"LD_LIBRARY_PATH", "/tmp"},
      {"PATH", "/tmp:/bin"},
      {"ASCEND_RUNTIME_OPTIONS", "NODRV"},
      {"ASCEND_VISIBLE_DEVICES", "all"},
      {"ASCEND_VNPU_SPECS", "vir01"},
      {"SOMETHING_ELSE", "x"},
      {"", "empty"},
      {"A=B", "x"},
      {std::string("NUL\0NAME", 8), "x"},
      {std::string(300, 'X'), "long"},
  };
  env.insert(hostile.begin(), hostile.end());
  env["NNODES"] = std::string("4\0LD_PRELOAD=/tmp/evil.so", 25);  // a documented name, an unusable value
  auto a = with_grant(base, Grant{"default", "p", "j", env, "", ""}, "");
  ASSERT_TRUE(a.ok()) << a.error().message();
  std::map<std::string, std::string> want = {{"ASCEND_VISIBLE_DEVICES", "3"}};
  for (const auto& n : kDocumentedLaunchEnv)
    if (n != "NNODES") want[n] = "v-" + n;
  EXPECT_EQ(a->allocation.envs, want);
  EXPECT_EQ(a->dropped.size(), hostile.size() + 1);
  for (const auto& d : a->dropped) {
    EXPECT_LE(d.size(), 64U + 2 + 3) << "cut short for the log: " << d;
    EXPECT_EQ(d.find('\0'), std::string::npos) << "printable for the log";
  }
}

// ---- configuration --------------------------------------------------------------------------------------

TEST(SchedulerConfig, YamlKeysAndValidation) {
  testing::TempDir dir;
  {
    std::ofstream f(dir / "c.yaml");
    f << "scheduler-url: https://sched:8443\nnode-name: node-7\nscheduler-token-file: /etc/token\n"
         "scheduler-ca-file: /etc/ca.crt\nranktable-dir: /var/lib/ascend/rt\n";
  }
  auto c = parse_options({"--config", dir / "c.yaml"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->scheduler_url, "https://sched:8443");
  EXPECT_EQ(c->node_name, "node-7");
  EXPECT_EQ(c->scheduler_token_file, "/etc/token");
  EXPECT_EQ(c->scheduler_ca_file, "/etc/ca.crt");
  EXPECT_EQ(c->ranktable_dir, "/var/lib/ascend/rt");
  EXPECT_TRUE(validate(*c).ok());
  EXPECT_TRUE(tracks_whole_chips(*c));

  Config none;
  EXPECT_EQ(none.ranktable_dir, "/var/lib/ascend-device-plugin/ranktables");
  EXPECT_FALSE(tracks_whole_chips(none));
  none.ranktable_dir = "relative";  // not checked without a scheduler
  EXPECT_TRUE(validate(none).ok());

  Config bad_url;
  bad_url.scheduler_url = "sched:8080";
  auto st = validate(bad_url);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("--scheduler-url"), std::string::npos) << st.error().message();
  Config bad_dir;
  bad_dir.scheduler_url = "http://127.0.0.1:8888";
  bad_dir.ranktable_dir = "rt";
  EXPECT_FALSE(validate(bad_dir).ok());
}

TEST(SchedulerConfig, PlainHttpGoesOnlyToLoopbackUnlessTheInsecureFlagSaysSo) {
  auto check = [](const std::vector<std::string>& args) {
    auto c = parse_options(args);
    EXPECT_TRUE(c.ok()) << c.error().message();
    return c.ok() ? validate(*c) : Status(c.error());
  };
  for (const char* url :
       {"http://127.0.0.1:8888", "http://127.9.9.9", "http://[::1]:8888", "http://localhost:1/x",
        "https://ascend-scheduler.kube-system.svc:8888", "https://10.0.0.1"}) {
    auto st = check({"--scheduler-url", url, "--scheduler-token-file", "/t"});
    EXPECT_TRUE(st.ok()) << url << ": " << st.error().message();
  }
  for (const char* url :
       {"http://ascend-scheduler.kube-system.svc:8888", "http://10.0.0.1:8888", "http://[fd00::1]:8888",
        "http://127.1:8888", "http://localhost.localdomain", "http://0.0.0.0:8888"}) {
    auto st = check({"--scheduler-url", url, "--scheduler-token-file", "/t"});
    ASSERT_FALSE(st.ok()) << url;
    EXPECT_EQ(st.error().code(), EINVAL);
    const std::string& m = st.error().message();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
    EXPECT_NE(m.find(url), std::string::npos) << m;
    EXPECT_NE(m.find("--insecure-scheduler-http"), std::string::npos) << m;
    EXPECT_TRUE(check({"--scheduler-url", url, "--insecure-scheduler-http"}).ok()) << url;
  }
  // In the YAML file too.
  testing::TempDir dir;
  ASSERT_TRUE(
      atomic_replace(dir / "c.yaml", "scheduler-url: http://sched:8888\ninsecure-scheduler-http: true\n")
          .ok());
  auto c = parse_options({"--config", dir / "c.yaml"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(c->insecure_scheduler_http);
  EXPECT_TRUE(validate(*c).ok());
  // A CA file says the operator expects TLS: with http:// it is a mistake, not something to ignore.
  auto st = check({"--scheduler-url", "http://127.0.0.1:8888", "--scheduler-ca-file", "/ca.crt"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("--scheduler-ca-file"), std::string::npos) << st.error().message();
}

TEST(SchedulerConfig, TheCaFileMustHoldACertificate) {
  testing::TempDir dir;
  Config c;
  c.scheduler_url = "https://127.0.0.1:1";
  c.node_name = "n";
  c.scheduler_ca_file = dir / "missing.crt";
  auto s = HttpScheduler::create(c, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("--scheduler-ca-file"), std::string::npos) << s.error().message();
  ASSERT_TRUE(
      atomic_replace(dir / "junk.crt", "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
          .ok());
  c.scheduler_ca_file = dir / "junk.crt";
  s = HttpScheduler::create(c, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("holds no PEM certificate"), std::string::npos) << s.error().message();
}

TEST(SchedulerConfig, NodeNameDefaultsToTheEnvironmentThenTheHostName) {
  const char* old = std::getenv("NODE_NAME");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("NODE_NAME", "node-from-env", 1);
  EXPECT_EQ(default_node_name(), "node-from-env");
  ::setenv("NODE_NAME", "", 1);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(default_node_name(), host);
  ::unsetenv("NODE_NAME");
  EXPECT_EQ(default_node_name(), host);
  if (old != nullptr) ::setenv("NODE_NAME", saved.c_str(), 1);
}

TEST(SchedulerConfig, HttpSchedulerNeedsANodeNameAndAReadableTokenPerRequest) {
  testing::TempDir dir;
  Config c;
  c.scheduler_url = "http://127.0.0.1:1";
  c.node_name.clear();
  EXPECT_FALSE(HttpScheduler::create(c, nullptr).ok());
  c.node_name = "n";
  c.scheduler_token_file = dir / "token";  // not there yet: a Secret may come later
  auto s = HttpScheduler::create(c, nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto st = (*s)->put_inventory(InventoryReport{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), EACCES) << st.error().message();
  EXPECT_NE(st.error().message().find("--scheduler-token-file"), std::string::npos);
  ASSERT_TRUE(atomic_replace(dir / "token", " \n").ok());
  EXPECT_EQ((*s)->put_inventory(InventoryReport{}).error().code(), EACCES) << "an empty token";
  ASSERT_TRUE(atomic_replace(dir / "token", "secret\n").ok());
  // Nothing listens on port 1: with a token the request goes out, and the scheduler is away.
  st = (*s)->put_inventory(InventoryReport{});
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(scheduler_unavailable(st.error())) << st.error().message();
}

TEST(SchedulerConfig, TheShippedDaemonSetWiresTheSchedulerOverTlsNodeNameRankTablesTokenAndMetrics) {
  YAML::Node cm;
  YAML::Node ds;
  YAML::Node policy;
  for (const auto& doc : YAML::LoadAllFromFile(std::string(ASCEND_SOURCE_DIR) +
                                               "/deploy/kubernetes/ascend-device-plugin.yaml")) {
    const auto kind = doc["kind"].as<std::string>();
    if (kind == "ConfigMap") cm = doc;
    if (kind == "DaemonSet") ds = doc;
    if (kind == "NetworkPolicy") policy = doc;
  }
  ASSERT_TRUE(cm && ds && policy);
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  const YAML::Node c = pod["containers"][0];
  std::map<std::string, std::string> fields;  // env name -> downward API field
  for (const auto& e : c["env"]) {
    if (e["valueFrom"] && e["valueFrom"]["fieldRef"])
      fields[e["name"].as<std::string>()] = e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>();
  }
  EXPECT_EQ(fields["NODE_NAME"], "spec.nodeName") << "NODE_NAME from the downward API's spec.nodeName";
  EXPECT_EQ(fields["POD_IP"], "status.podIP");

  // The command line as the kubelet expands it ($(POD_IP) is the pod's IP), the ConfigMap as the file.
  testing::TempDir dir;
  ASSERT_TRUE(atomic_replace(dir / "config.yaml", cm["data"]["config.yaml"].as<std::string>()).ok());
  std::vector<std::string> args;
  for (std::size_t i = 1; i < c["command"].size(); ++i) {
    auto a = c["command"][i].as<std::string>();
    if (auto at = a.find("$(POD_IP)"); at != std::string::npos) a.replace(at, 9, "10.1.2.3");
    if (a.starts_with("--config=")) a = "--config=" + (dir / "config.yaml");
    args.push_back(a);
  }
  auto cfg = parse_options(args);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message();
  EXPECT_TRUE(validate(*cfg).ok()) << validate(*cfg).error().message();
  EXPECT_TRUE(cfg->node_name.empty()) << "the node name comes from $NODE_NAME";
  EXPECT_EQ(cfg->metrics_addr, "10.1.2.3:9101") << "the pod IP only, not every address";
  EXPECT_EQ(cfg->scheduler_url, "https://ascend-scheduler.kube-system.svc:8888");
  EXPECT_FALSE(cfg->insecure_scheduler_http);
  int metrics_port = 0;
  for (const auto& p : c["ports"])
    if (p["name"].as<std::string>() == "metrics") metrics_port = p["containerPort"].as<int>();
  EXPECT_EQ(metrics_port, 9101);

  // Only the namespace `monitoring` reaches the plugin's pods, on the metrics port only.
  EXPECT_EQ(policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());
  ASSERT_EQ(policy["spec"]["ingress"].size(), 1U);
  const YAML::Node rule = policy["spec"]["ingress"][0];
  ASSERT_EQ(rule["ports"].size(), 1U);
  EXPECT_EQ(rule["ports"][0]["port"].as<std::string>(), "metrics");
  ASSERT_EQ(rule["from"].size(), 1U);
  EXPECT_EQ(
      rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].as<std::string>(),
      "monitoring");

  // name -> mount path, and name -> volume
  std::map<std::string, std::string> mounts;
  for (const auto& m : c["volumeMounts"])
    mounts[m["name"].as<std::string>()] = m["mountPath"].as<std::string>();
  std::map<std::string, YAML::Node> volumes;
  for (const auto& v : pod["volumes"]) volumes.emplace(v["name"].as<std::string>(), YAML::Node(v));
  // The kubelet mounts the rank table from the host path the plugin names: the folder is the same path
  // inside the plugin's container and on the host.
  bool ranktables = false;
  for (const auto& [name, path] : mounts) {
    if (path != cfg->ranktable_dir) continue;
    ASSERT_TRUE(volumes[name]["hostPath"]) << name;
    EXPECT_EQ(volumes[name]["hostPath"]["path"].as<std::string>(), cfg->ranktable_dir);
    ranktables = true;
  }
  EXPECT_TRUE(ranktables) << "no hostPath volume at " << cfg->ranktable_dir;
  // The token file lies in an optional Secret volume.
  bool token = false;
  for (const auto& [name, path] : mounts) {
    if (cfg->scheduler_token_file != path + "/token") continue;
    ASSERT_TRUE(volumes[name]["secret"]) << name;
    EXPECT_EQ(volumes[name]["secret"]["secretName"].as<std::string>(), "ascend-scheduler-token");
    EXPECT_TRUE(volumes[name]["secret"]["optional"].as<bool>());
    token = true;
  }
  EXPECT_TRUE(token) << "no Secret volume holds " << cfg->scheduler_token_file;
  // The scheduler's CA from a ConfigMap (a CA is no secret; the scheduler's key is not mounted here).
  bool ca = false;
  for (const auto& [name, path] : mounts) {
    if (cfg->scheduler_ca_file != path + "/ca.crt") continue;
    ASSERT_TRUE(volumes[name]["configMap"]) << name;
    EXPECT_EQ(volumes[name]["configMap"]["name"].as<std::string>(), "ascend-scheduler-ca");
    ca = true;
  }
  EXPECT_TRUE(ca) << "no ConfigMap volume holds " << cfg->scheduler_ca_file;
}

// ---- the Plugin and the Reporter over a recording SchedulerApi ------------------------------------------

// A device query over a fixed snapshot: the Plugin's tests change the state with on_host_change.
class FixedQuery : public npu::DeviceQuery {
 public:
  explicit FixedQuery(const npu::HostState& s) : s_(npu::to_snapshot(s)) {}
  Result<npu::DeviceSnapshot> snapshot() const override { return s_; }
  std::string host_path(const std::string& p) const override { return "/host" + p; }
  Result<npu::Vnpu> create_vnpu(int, const std::string&, std::optional<int>, const npu::VnpuOwner&) override {
    return Error(ENOSYS, "fixed");
  }
  Status destroy_vnpu(int, std::optional<int>, const std::optional<npu::VnpuOwner>&) override {
    return Error(ENOSYS, "fixed");
  }
  Result<std::unique_ptr<npu::Subscription>> subscribe(ChangeCallback) const override {
    return Error(ENOSYS, "fixed");
  }

 protected:
  npu::DeviceSnapshot s_;
};

class RecordingScheduler final : public SchedulerApi {
 public:
  Status put_inventory(const InventoryReport& report) override {
    std::unique_lock lock(mu_);
    puts.push_back(report);
    cv_.notify_all();
    auto answer = put_answer;
    lock.unlock();
    return answer ? answer(static_cast<int>(puts.size())) : Status{};
  }
  Result<std::vector<Reservation>> reservations() override {
    std::lock_guard lock(mu_);
    if (throw_from_calls) throw std::runtime_error("scheduler client bug");
    ++reservation_calls;
    return reservation_answer;
  }
  Result<Grant> allocation_taken(const std::vector<int>& chips) override {
    std::lock_guard lock(mu_);
    if (throw_from_calls) throw std::runtime_error("scheduler client bug");
    taken.push_back(chips);
    auto it = grants.find(chips);
    if (it != grants.end()) return it->second;
    return Error(ENOENT, "404 no pending reservation");
  }
  Status allocation_returned(const std::vector<int>& chips) override {
    std::lock_guard lock(mu_);
    returned.push_back(chips);
    return {};
  }
  Result<std::string> job_ranktable(const std::string& ns, const std::string& job) override {
    std::function<void()> during;
    Result<std::string> answer = Error(ENOENT, "404 no job " + ns + "/" + job);
    {
      std::lock_guard lock(mu_);
      table_calls.push_back(ns + "/" + job);
      if (auto it = tables.find(ns + "/" + job); it != tables.end()) answer = it->second;
      during = std::exchange(during_table_call, {});
    }
    if (during) during();  // what happens while the answer is on its way
    return answer;
  }

  // Waits until at least `n` PUTs arrived.
  bool wait_puts(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return puts.size() >= n; });
  }
  std::vector<InventoryReport> put_log() {
    std::lock_guard lock(mu_);
    return puts;
  }

  std::function<Status(int)> put_answer;  // by attempt number, 1-based
  bool throw_from_calls = false;          // reservations() and allocation_taken() throw
  Result<std::vector<Reservation>> reservation_answer = std::vector<Reservation>{};
  std::map<std::vector<int>, Result<Grant>> grants;
  std::vector<std::vector<int>> taken;
  std::vector<std::vector<int>> returned;
  int reservation_calls = 0;
  std::map<std::string, Result<std::string>> tables;  // "ns/job" -> the answer; else 404
  std::vector<std::string> table_calls;
  std::function<void()> during_table_call;  // run once, by the next job_ranktable, before it answers

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<InventoryReport> puts;
};

class PluginWithScheduler : public ::testing::Test {
 protected:
  testing::TempDir tmp;
  FixedQuery query{profile("atlas800t-a2")};
  RecordingScheduler sched;
  std::unique_ptr<Plugin> plugin;

  void SetUp() override {
    Config cfg;
    cfg.scheduler_url = "https://sched";
    cfg.node_name = "node-1";
    cfg.ranktable_dir = tmp / "ranktables";
    auto p = Plugin::create(query, cfg, nullptr, &sched);
    ASSERT_TRUE(p.ok()) << p.error().message();
    plugin = std::move(p).value();
  }

  std::vector<std::string> preferred(std::vector<std::string> available, int size,
                                     std::vector<std::string> must = {}) {
    auto r = plugin->preferred(kChips, {{std::move(available), std::move(must), size}});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? r->at(0) : std::vector<std::string>{};
  }
};

TEST_F(PluginWithScheduler, PreferredTakesTheReservationElseTheNodeLevelChoice) {
  const auto all = chip_ids(kChips, {0, 1, 2, 3, 4, 5, 6, 7});
  const auto node_level = preferred(all, 4);  // no reservations
  ASSERT_EQ(node_level.size(), 4U);
  ASSERT_NE(node_level, chip_ids(kChips, {4, 5, 6, 7})) << "the reservation below must differ from it";
  sched.reservation_answer = std::vector<Reservation>{{"default", "train-1", "train", {7, 6, 5, 4}}};
  EXPECT_EQ(preferred(all, 4), chip_ids(kChips, {4, 5, 6, 7}));
  EXPECT_EQ(preferred(chip_ids(kChips, {0, 1, 2, 3, 4, 5, 6}), 4), node_level);
  sched.reservation_answer = Error(ECONNREFUSED, "scheduler away");
  EXPECT_EQ(preferred(all, 4), node_level);
  EXPECT_EQ(sched.reservation_calls, 4);

  // Two containers in one call never get the same reservation.
  sched.reservation_answer =
      std::vector<Reservation>{{"default", "a", "j", {4, 5}}, {"default", "b", "j", {6, 7}}};
  auto two = plugin->preferred(kChips, {{all, {}, 2}, {all, {}, 2}});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ((*two)[0], chip_ids(kChips, {4, 5}));
  EXPECT_EQ((*two)[1], chip_ids(kChips, {6, 7}));
}

TEST_F(PluginWithScheduler, AllocateAddsTheGrantWritesTheRankTableAndMarksTheChipsInUse) {
  const json table = {{"version", "1.0"}, {"server_count", "4"}};
  sched.grants.insert_or_assign({4, 5, 6, 7}, Grant{"default",
                                                    "train-1",
                                                    "train",
                                                    {{"ASCEND_JOB", "train"}, {"RANK_START", "8"}},
                                                    "/etc/ascend/hccl.json",
                                                    table.dump(4)});
  const auto v0 = plugin->version();
  auto r = plugin->allocate(kChips, {chip_ids(kChips, {7, 5, 6, 4})});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(sched.taken, (std::vector<std::vector<int>>{{4, 5, 6, 7}}));  // ascending phy ids
  const auto& c = r->at(0);
  EXPECT_EQ(c.envs.at("ASCEND_VISIBLE_DEVICES"), "4,5,6,7");
  EXPECT_EQ(c.envs.at("ASCEND_JOB"), "train");
  EXPECT_EQ(c.envs.at("RANK_START"), "8");
  const std::string folder = tmp / "ranktables/default_train-1";
  const std::string file = folder + "/hccl.json";
  ASSERT_EQ(c.mounts.size(), 5U);
  EXPECT_EQ(c.mounts.back(), (MountSpec{"/etc/ascend", folder, true}));
  auto content = read_file(file);
  ASSERT_TRUE(content.ok()) << content.error().message();
  EXPECT_EQ(json::parse(*content), table);
  EXPECT_EQ(*content, table.dump(4));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_IRUSR | S_IWUSR | S_IRGRP)) << "0640";
  ASSERT_EQ(::stat(folder.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_IRWXU | S_IRGRP | S_IXGRP)) << "0750";
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(folder), {}), 1) << "the rank table only";

  EXPECT_GT(plugin->version(), v0) << "the reporter must wake";
  auto inv = plugin->inventory();
  for (const auto& chip : inv.chips) EXPECT_EQ(chip.in_use, chip.phy_id >= 4) << chip.phy_id;

  // A pod the scheduler does not know: answered as without a scheduler.
  auto plain = plugin->allocate(kChips, {chip_ids(kChips, {0})});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->at(0).envs, (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "0"}}));
  EXPECT_EQ(plain->at(0).mounts.size(), 1U);
}

TEST_F(PluginWithScheduler, A409FailsTheAllocateWithTheReasonAndClaimsNothing) {
  sched.grants.insert_or_assign(
      {2, 3}, Error(EBUSY, "scheduler POST ...: 409 chip 3 turned unhealthy; reserved chips are 2,4"));
  auto r = plugin->allocate(kChips, {chip_ids(kChips, {2, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EBUSY);
  EXPECT_NE(r.error().message().find("chip 3 turned unhealthy; reserved chips are 2,4"), std::string::npos)
      << r.error().message();
  for (const auto& chip : plugin->inventory().chips) EXPECT_FALSE(chip.in_use) << chip.phy_id;
}

// One Allocate for two containers: the first takes its reservation, the second is refused. The call fails,
// so the first reservation goes back to the scheduler (its pod waits for its chips again).
TEST_F(PluginWithScheduler, AFailedAllocateGivesBackTheReservationsItTook) {
  sched.grants.insert_or_assign({0, 1}, Grant{"default", "a", "", {}, "", ""});
  sched.grants.insert_or_assign({2, 3}, Error(EBUSY, "409 reserved chips are 2,4"));
  auto r = plugin->allocate(kChips, {chip_ids(kChips, {0, 1}), chip_ids(kChips, {2, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(sched.taken, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(sched.returned, (std::vector<std::vector<int>>{{0, 1}}));
  for (const auto& chip : plugin->inventory().chips) EXPECT_FALSE(chip.in_use) << chip.phy_id;
  // A call that succeeds gives nothing back.
  sched.grants.insert_or_assign({2, 3}, Grant{"default", "b", "", {}, "", ""});
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {0, 1}), chip_ids(kChips, {2, 3})}).ok());
  EXPECT_EQ(sched.returned.size(), 1U);
}

TEST_F(PluginWithScheduler, AnAbsentOrBrokenSchedulerIsAnsweredAsAloneButABadGrantFails) {
  sched.grants.insert_or_assign({1}, Error(ETIMEDOUT, "scheduler POST: timed out"));
  sched.grants.insert_or_assign({2}, Error(EAGAIN, "scheduler POST: 503"));
  sched.grants.insert_or_assign({3}, Error(EACCES, "scheduler POST: 401"));
  for (int phy : {1, 2, 3}) {
    auto r = plugin->allocate(kChips, {chip_ids(kChips, {phy})});
    ASSERT_TRUE(r.ok()) << phy << ": " << r.error().message();
    EXPECT_EQ(r->at(0).envs,
              (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", std::to_string(phy)}}));
  }
  sched.grants.insert_or_assign({5}, Grant{"default", "../x", "j", {}, "/etc/ascend/hccl.json", "{}"});
  auto bad = plugin->allocate(kChips, {chip_ids(kChips, {5})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EPROTO);
  EXPECT_FALSE(plugin->inventory().chips[5].in_use);
  sched.grants.insert_or_assign({6}, Grant{"default", "p", "j", {}, "etc/hccl.json", "{}"});
  bad = plugin->allocate(kChips, {chip_ids(kChips, {6})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EPROTO);
  sched.grants.insert_or_assign({7}, Grant{"default", "q", "j", {}, "/etc/hccl.json", "{}"});
  bad = plugin->allocate(kChips, {chip_ids(kChips, {7})});
  ASSERT_FALSE(bad.ok()) << "mounting /etc would hide the image's";
  EXPECT_EQ(bad.error().code(), EPROTO);
  EXPECT_FALSE(std::filesystem::exists(tmp / "ranktables")) << "an unusable grant leaves nothing";
}

TEST_F(PluginWithScheduler, AllocateDropsTheEnvTheSchedulerDoesNotDocumentAndSucceeds) {
  std::map<std::string, std::string> env = {{"LD_PRELOAD", "/tmp/evil.so"},
                                            {"PATH", "/tmp"},
                                            {"ASCEND_RUNTIME_OPTIONS", "NODRV"},
                                            {"ASCEND_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"},
                                            {"UNKNOWN_NAME", "x"}};
  for (const auto& n : kDocumentedLaunchEnv) env[n] = "v";
  sched.grants.insert_or_assign({2, 3}, Grant{"default", "p", "j", env, "", ""});
  auto r = plugin->allocate(kChips, {chip_ids(kChips, {2, 3})});
  ASSERT_TRUE(r.ok()) << r.error().message();
  std::map<std::string, std::string> want = {{"ASCEND_VISIBLE_DEVICES", "2,3"}};
  for (const auto& n : kDocumentedLaunchEnv) want[n] = "v";
  EXPECT_EQ(r->at(0).envs, want);
  EXPECT_TRUE(plugin->inventory().chips[2].in_use) << "the Allocate succeeded";
}

// A rank table lives as long as its pod's chips: it goes when the pod-resources no longer list them, when
// a failed Allocate gives them back, and when the kubelet hands one of them out again (its pod is gone).
TEST_F(PluginWithScheduler, RankTablesAreRemovedWhenTheirChipsAreFreed) {
  auto grant = [](const char* pod) { return Grant{"default", pod, "j", {}, "/etc/ascend/hccl.json", "{}"}; };
  const std::string a = tmp / "ranktables/default_a";
  const std::string b = tmp / "ranktables/default_b";
  sched.grants.insert_or_assign({0, 1}, grant("a"));
  sched.grants.insert_or_assign({2, 3}, grant("b"));
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {0, 1})}).ok());
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {2, 3})}).ok());
  ASSERT_TRUE(std::filesystem::exists(a + "/hccl.json"));
  ASSERT_TRUE(std::filesystem::exists(b + "/hccl.json"));
  // Pod a's chips are still listed; pod b's are not.
  const std::map<std::string, std::set<std::string>> listed = {
      {"huawei.com/Ascend910", {"Ascend910-0", "Ascend910-1"}}};
  EXPECT_EQ(plugin->reconcile(listed, 1h), 0) << "within the grace period";
  EXPECT_TRUE(std::filesystem::exists(b));
  EXPECT_EQ(plugin->reconcile(listed, 0ms), 2) << "chips 2 and 3";
  EXPECT_TRUE(std::filesystem::exists(a));
  EXPECT_FALSE(std::filesystem::exists(b)) << "pod b's chips are free: its folder goes";

  // The kubelet hands chip 1 out again, to a pod the scheduler does not know: pod a is gone.
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {1})}).ok());
  EXPECT_FALSE(std::filesystem::exists(a));

  // A failed Allocate leaves no rank table behind.
  const std::string c = tmp / "ranktables/default_c";
  sched.grants.insert_or_assign({4, 5}, grant("c"));
  sched.grants.insert_or_assign({6, 7}, Error(EBUSY, "409 reserved chips are 6,8"));
  EXPECT_FALSE(plugin->allocate(kChips, {chip_ids(kChips, {4, 5}), chip_ids(kChips, {6, 7})}).ok());
  EXPECT_FALSE(std::filesystem::exists(c));
  EXPECT_EQ(sched.returned.back(), (std::vector<int>{4, 5}));
}

// What an earlier pod of the same name left goes: its folder (another file name, a 0666 file) and the file
// an earlier version of the plugin wrote in the folder's place.
TEST_F(PluginWithScheduler, ARankTableLeftByAnEarlierPodOfTheSameNameIsReplacedWithMode0640) {
  const std::string folder = tmp / "ranktables/default_p";
  ASSERT_TRUE(make_dirs(folder).ok());
  ASSERT_TRUE(atomic_replace(folder + "/hccl.json", "old", 0666).ok());
  ASSERT_TRUE(atomic_replace(folder + "/other.json", "old", 0666).ok());
  ASSERT_TRUE(atomic_replace(tmp / "ranktables/default_p.json", "old", 0666).ok());
  ASSERT_TRUE(::chmod(folder.c_str(), 0777) == 0);
  sched.grants.insert_or_assign({5}, Grant{"default", "p", "j", {}, "/etc/ascend/hccl.json", "{\"new\": 1}"});
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {5})}).ok());
  struct stat st {};
  ASSERT_EQ(::stat((folder + "/hccl.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_IRUSR | S_IWUSR | S_IRGRP));
  EXPECT_EQ(*read_file(folder + "/hccl.json"), "{\"new\": 1}");
  EXPECT_FALSE(std::filesystem::exists(folder + "/other.json"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "ranktables/default_p.json")) << "the old-style file";
  ASSERT_EQ(::stat(folder.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(0750));

  // Pod "p.json"'s folder has the name pod "p"'s old-style file had: each keeps its own.
  sched.grants.insert_or_assign({6}, Grant{"default", "p.json", "j", {}, "/etc/ascend/hccl.json", "{}"});
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {6})}).ok());
  sched.grants.insert_or_assign({7}, Grant{"default", "p", "j", {}, "/etc/ascend/hccl.json", "{}"});
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {7})}).ok());
  EXPECT_EQ(*read_file(tmp / "ranktables/default_p.json/hccl.json"), "{}");
  EXPECT_EQ(*read_file(folder + "/hccl.json"), "{}");
}

// Hand-written HCCL rank tables (the format of /work/shared/reference's captures, version 1.0): job "train"
// on this node before and after a recovery moved rank 1 to chip 6 (device 6, its own device IP).
const json kTrainBefore = json::parse(R"({"version": "1.0", "status": "completed", "server_count": "1",
    "server_list": [{"server_id": "node-1", "device": [
      {"device_id": "0", "device_ip": "192.168.100.101", "rank_id": "0"},
      {"device_id": "1", "device_ip": "192.168.101.101", "rank_id": "1"}]}]})");
const json kTrainAfter = json::parse(R"({"version": "1.0", "status": "completed", "server_count": "1",
    "server_list": [{"server_id": "node-1", "device": [
      {"device_id": "0", "device_ip": "192.168.100.101", "rank_id": "0"},
      {"device_id": "6", "device_ip": "192.168.102.102", "rank_id": "1"}]}]})");

// The refresh: each job with a copy here is asked once; a changed table goes over every copy of that job,
// atomically (a new inode in the same folder) with the mode kept; an unchanged one, a 404 or an error leave
// the files alone; a pod without a job is never asked about.
TEST_F(PluginWithScheduler, RefreshWritesTheSchedulersNewTableOverEveryCopyOfThatJob) {
  auto grant = [](const char* pod, const char* job, const json& t) {
    return Grant{"default", pod, job, {}, "/etc/ascend/hccl.json", t.dump(4)};
  };
  const json other = {{"version", "1.0"}, {"server_count", "2"}};
  sched.grants.insert_or_assign({0}, grant("train-0", "train", kTrainBefore));
  sched.grants.insert_or_assign({1}, grant("train-1", "train", kTrainBefore));
  sched.grants.insert_or_assign({2}, grant("other-0", "other", other));
  sched.grants.insert_or_assign({3}, grant("solo", "", other));
  for (int phy : {0, 1, 2, 3}) ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {phy})}).ok()) << phy;
  const std::string a = tmp / "ranktables/default_train-0/hccl.json";
  const std::string b = tmp / "ranktables/default_train-1/hccl.json";
  const std::string c = tmp / "ranktables/default_other-0/hccl.json";
  const std::string d = tmp / "ranktables/default_solo/hccl.json";
  auto inode = [](const std::string& f) {
    struct stat st {};
    EXPECT_EQ(::stat(f.c_str(), &st), 0) << f;
    return st.st_ino;
  };

  // The scheduler still has the tables the grants carried: nothing is written.
  sched.tables.insert_or_assign("default/train", kTrainBefore.dump(4));
  sched.tables.insert_or_assign("default/other", other.dump(4));
  const auto ino_a = inode(a);
  EXPECT_EQ(plugin->refresh_ranktables(), 0);
  EXPECT_EQ(sched.table_calls, (std::vector<std::string>{"default/other", "default/train"}));
  EXPECT_EQ(inode(a), ino_a) << "an unchanged table is not rewritten";

  // A recovery moved rank 1: both copies of train get the new table; other's scheduler is away.
  sched.tables.insert_or_assign("default/train", kTrainAfter.dump(4));
  sched.tables.insert_or_assign("default/other", Error(EAGAIN, "scheduler GET ...: 503"));
  EXPECT_EQ(plugin->refresh_ranktables(), 2);
  for (const auto& f : {a, b}) {
    auto got = read_file(f);
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(json::parse(*got), kTrainAfter) << f;
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(0640)) << f;
  }
  EXPECT_NE(inode(a), ino_a) << "renamed over, not written in place";
  EXPECT_EQ(json::parse(*read_file(c)), other);
  EXPECT_EQ(json::parse(*read_file(d)), other);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp / "ranktables/default_train-0"), {}), 1)
      << "no temporary file left";

  // The job is gone from the scheduler: the copies stay as they are.
  sched.tables.erase("default/train");
  EXPECT_EQ(plugin->refresh_ranktables(), 0);
  EXPECT_EQ(json::parse(*read_file(a)), kTrainAfter);
  const std::set<std::string> asked(sched.table_calls.begin(), sched.table_calls.end());
  EXPECT_EQ(asked, (std::set<std::string>{"default/other", "default/train"}))
      << "never about a pod without a job";

  // A copy whose chips are free is neither kept nor asked about.
  const std::map<std::string, std::set<std::string>> listed = {
      {"huawei.com/Ascend910", {"Ascend910-0", "Ascend910-1", "Ascend910-3"}}};
  ASSERT_EQ(plugin->reconcile(listed, 0ms), 1);
  sched.table_calls.clear();
  plugin->refresh_ranktables();
  EXPECT_EQ(sched.table_calls, std::vector<std::string>{"default/train"});
}

// A pod allocated while the question is on its way holds a grant at least as new as the answer: the
// refresh does not write the (older) answer over it, and writes the others.
TEST_F(PluginWithScheduler, RefreshNeverWritesAnAnswerOverACopyWrittenWhileItWasOnItsWay) {
  auto grant = [](const char* pod, const json& t) {
    return Grant{"default", pod, "train", {}, "/etc/ascend/hccl.json", t.dump(4)};
  };
  const json initial = {{"version", "1.0"}, {"server_count", "0"}};
  sched.grants.insert_or_assign({0}, grant("train-0", initial));
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {0})}).ok());
  sched.tables.insert_or_assign("default/train", kTrainBefore.dump(4));  // read before the recovery
  sched.grants.insert_or_assign({6}, grant("train-1", kTrainAfter));     // the replacement pod's grant
  sched.during_table_call = [&] { ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {6})}).ok()); };
  EXPECT_EQ(plugin->refresh_ranktables(), 1);
  EXPECT_EQ(json::parse(*read_file(tmp / "ranktables/default_train-0/hccl.json")), kTrainBefore);
  EXPECT_EQ(json::parse(*read_file(tmp / "ranktables/default_train-1/hccl.json")), kTrainAfter)
      << "the newer grant stays";
  // The next pass brings the scheduler's newer table to both.
  sched.tables.insert_or_assign("default/train", kTrainAfter.dump(4));
  EXPECT_EQ(plugin->refresh_ranktables(), 1);
  EXPECT_EQ(json::parse(*read_file(tmp / "ranktables/default_train-0/hccl.json")), kTrainAfter);
}

TEST(SchedulerWire, ARankTableAnswerIsAnObjectDumpedAsTheGrantsIs) {
  const json t = {{"version", "1.0"}, {"server_list", json::array({{{"server_id", "n"}}})}};
  auto r = parse_ranktable(t.dump());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, t.dump(4));
  Grant g = *parse_grant(json{
      {"namespace", "d"},
      {"pod", "p"},
      {"ranktable_path", "/etc/ascend/hccl.json"},
      {"ranktable", t}}.dump());
  EXPECT_EQ(*r, g.ranktable) << "the same table, the same text: no needless rewrite";
  for (const char* bad : {"", "[]", "\"x\"", "{", "null"}) {
    auto e = parse_ranktable(bad);
    EXPECT_FALSE(e.ok()) << bad;
    if (!e.ok()) {
      EXPECT_EQ(e.error().code(), EPROTO);
    }
  }
}

TEST_F(PluginWithScheduler, HandedOutChipsEndWhenThePodResourcesNoLongerListThem) {
  ASSERT_TRUE(plugin->allocate(kChips, {chip_ids(kChips, {6})}).ok());
  EXPECT_TRUE(plugin->inventory().chips[6].in_use);
  std::map<std::string, std::set<std::string>> listed = {{"huawei.com/Ascend910", {"Ascend910-6"}}};
  EXPECT_EQ(plugin->reconcile(listed, 0ms), 0);
  EXPECT_TRUE(plugin->inventory().chips[6].in_use);
  EXPECT_EQ(plugin->reconcile({}, 1h), 0) << "within the grace period";
  EXPECT_EQ(plugin->reconcile({}, 0ms), 1);
  EXPECT_FALSE(plugin->inventory().chips[6].in_use);
}

// The reporter waits on a test clock: what it sends without the clock moving is sent on a change, and each
// wait (backoff, slow rate, re-send) is read from the clock and ended by advancing it.
TEST(Reporter, SendsAtStartOnEveryChangeAndPeriodically) {
  npu::HostState s = profile("atlas800t-a2");
  FixedQuery query(s);
  Config cfg;
  cfg.scheduler_url = "https://sched";
  RecordingScheduler sched;
  TestClock clock;
  // The second report's answer takes 50 ms of the test clock: the re-send period counts from when a report
  // left, not from when its answer came back (or from whenever the loop got round to noting it).
  sched.put_answer = [&clock](int n) -> Status {
    if (n == 2) clock.advance(50ms);
    return {};
  };
  auto plugin = Plugin::create(query, cfg, nullptr, &sched);
  ASSERT_TRUE(plugin.ok());
  Reporter reporter(**plugin, sched, {400ms, 10ms, 100ms, &clock});
  ASSERT_TRUE(sched.wait_puts(1, kEventually));
  EXPECT_EQ(sched.put_log()[0], (*plugin)->inventory());

  // A fault: a new report at once (the clock does not move), with chip 3 unhealthy.
  s.chips[3].faults.push_back({0x80E18402, npu::Health::kCritical});  // SeparateNPU
  (*plugin)->on_host_change(s);
  ASSERT_TRUE(sched.wait_puts(2, kEventually));
  EXPECT_FALSE(sched.put_log()[1].chips[3].healthy);

  // A change that the scheduler does not see (a new generation, same health) sends nothing; the periodic
  // re-send comes when resend_every has passed since the last accepted report, not before.
  s.generation++;
  (*plugin)->on_host_change(s);
  clock.advance(349ms);  // 399 ms after the second report left
  EXPECT_FALSE(sched.wait_puts(3, 300ms)) << "re-sent before resend_every";
  clock.advance(1ms);
  ASSERT_TRUE(sched.wait_puts(3, kEventually));
  EXPECT_EQ(sched.put_log()[2], sched.put_log()[1]);
}

TEST(Reporter, BacksOffWhileTheSchedulerIsAwayAndSlowsDownOnARefusal) {
  FixedQuery query(profile("atlas800t-a2"));
  Config cfg;
  cfg.scheduler_url = "https://sched";
  RecordingScheduler sched;
  // Away for 5 attempts, then a refusal twice, then accepted.
  sched.put_answer = [](int n) -> Status {
    if (n <= 5) return Error(ECONNREFUSED, "connection refused");
    if (n <= 7) return Error(ENOENT, "404 node node-1 is not in the cluster file");
    return {};
  };
  auto plugin = Plugin::create(query, cfg, nullptr, &sched);
  ASSERT_TRUE(plugin.ok());
  TestClock clock;
  Reporter reporter(**plugin, sched, {300ms, 20ms, 80ms, &clock});
  // Backoff 20, 40, 80, 80, 80 ms (capped at backoff_max) after the five refused connections; after each
  // refusal the slow rate (resend_every).
  const std::vector<std::chrono::milliseconds> waits = {20ms, 40ms, 80ms, 80ms, 80ms, 300ms, 300ms};
  for (std::size_t i = 0; i < waits.size(); ++i) {
    ASSERT_TRUE(clock.settle(1)) << "after attempt " << i + 1;
    EXPECT_EQ(sched.put_log().size(), i + 1);
    ASSERT_EQ(clock.waits(), std::vector<TestClock::Steady::duration>{waits[i]}) << "after attempt " << i + 1;
    clock.advance(waits[i]);
  }
  ASSERT_TRUE(sched.wait_puts(8, kEventually));
  EXPECT_TRUE(eventually([&] { return reporter.stats().accepted == 1; }));
  EXPECT_EQ(reporter.stats().attempts, 8);
}

TEST(Reporter, StopsWhileWaiting) {
  FixedQuery query(profile("atlas800t-a2"));
  Config cfg;
  cfg.scheduler_url = "https://sched";
  RecordingScheduler sched;
  auto plugin = Plugin::create(query, cfg, nullptr, &sched);
  ASSERT_TRUE(plugin.ok());
  for (auto away : {false, true}) {
    if (away) sched.put_answer = [](int) -> Status { return Error(ECONNREFUSED, "refused"); };
    TestClock clock;  // never advanced: only the stop can end the reporter's 30 s or 10 s wait
    auto reporter = std::make_unique<Reporter>(**plugin, sched, ReporterOptions{30s, 10s, 10s, &clock});
    if (away) {
      ASSERT_TRUE(clock.settle(1)) << "in backoff";
    } else {
      ASSERT_TRUE(sched.wait_puts(1, kEventually)) << "waiting for a change";
    }
    reporter.reset();  // hangs if the stop does not end the wait
  }
}

// ---- no thread or handler of the plugin ends it (issue 24) ----------------------------------------------

// A device query whose snapshot() throws while told to (a driver binding's bug), and whose host can change.
class FlakyQuery final : public FixedQuery {
 public:
  using FixedQuery::FixedQuery;
  Result<npu::DeviceSnapshot> snapshot() const override {
    std::lock_guard lock(mu_);
    if (throws_ > 0) {
      --throws_;
      throw std::runtime_error("snapshot bug");
    }
    return s_;
  }
  void set(const npu::HostState& s, int throws) {
    std::lock_guard lock(mu_);
    s_ = npu::to_snapshot(s);
    throws_ = throws;
  }
  // Changes come only through the periodic driver check.
  Result<std::unique_ptr<npu::Subscription>> subscribe(ChangeCallback) const override {
    return std::make_unique<npu::Subscription>();
  }

 private:
  mutable std::mutex mu_;
  mutable int throws_ = 0;
};

TEST(NothingEndsThePlugin, ADriverCheckThatThrowsIsLoggedAndTheNextCheckAppliesTheHost) {
  testing::GuardedCapture cap;
  npu::HostState s = profile("atlas800t-a2");
  FlakyQuery query(s);
  Config cfg;
  cfg.health_interval = 20ms;
  TestClock clock;
  auto plugin = Plugin::create(query, cfg, nullptr, nullptr, &clock);
  ASSERT_TRUE(plugin.ok()) << plugin.error().message();
  s.chips[3].faults.push_back({0x80E18402, npu::Health::kCritical});  // SeparateNPU
  query.set(s, 2);  // the next two checks throw; the third reads the fault
  ASSERT_TRUE((*plugin)->watch().ok());
  for (int check = 1; check <= 3; ++check) {
    ASSERT_TRUE(clock.settle(1)) << "check " << check;
    EXPECT_EQ(clock.waits(), std::vector<TestClock::Steady::duration>{20ms}) << "check " << check;
    clock.advance(20ms);
    ASSERT_TRUE(clock.settle(1)) << "check " << check;
    EXPECT_EQ((*plugin)->inventory().chips[3].healthy, check < 3) << "check " << check;
  }
  EXPECT_EQ(cap.errors_with("driver check: internal error: snapshot bug (please report it)").size(), 1U)
      << "the same text twice is said once";
  EXPECT_EQ((*plugin)->driver_lost(), "") << "a throw is not a lost driver";
}

TEST(NothingEndsThePlugin, ARankTableRefreshThatThrowsIsLoggedAndTheNextPassWrites) {
  testing::GuardedCapture cap;
  testing::TempDir tmp;
  FlakyQuery query(profile("atlas800t-a2"));
  RecordingScheduler sched;
  Config cfg;
  cfg.scheduler_url = "https://sched";
  cfg.node_name = "node-1";
  cfg.ranktable_dir = tmp / "ranktables";
  cfg.ranktable_refresh = 20ms;
  cfg.health_interval = 1h;
  TestClock clock;
  auto plugin = Plugin::create(query, cfg, nullptr, &sched, &clock);
  ASSERT_TRUE(plugin.ok()) << plugin.error().message();
  sched.grants.insert_or_assign(
      {0}, Grant{"default", "train-0", "train", {}, "/etc/ascend/hccl.json", kTrainBefore.dump(4)});
  ASSERT_TRUE((*plugin)->allocate(kChips, {chip_ids(kChips, {0})}).ok());
  sched.tables.insert_or_assign("default/train", kTrainAfter.dump(4));
  sched.during_table_call = [] { throw std::runtime_error("refresh bug"); };  // the first pass only
  ASSERT_TRUE((*plugin)->watch().ok());
  const std::string file = tmp / "ranktables/default_train-0/hccl.json";
  auto table = [&] {
    auto got = read_file(file);
    return got.ok() ? json::parse(*got, nullptr, false) : json();
  };
  ASSERT_TRUE(clock.settle(2));  // the driver check and the refresh
  clock.advance(20ms);
  ASSERT_TRUE(clock.settle(2));
  EXPECT_EQ(cap.errors_with("rank-table refresh: internal error: refresh bug (please report it)").size(), 1U);
  EXPECT_EQ(table(), kTrainBefore) << "the pass that threw wrote nothing";
  clock.advance(20ms);
  ASSERT_TRUE(clock.settle(2));
  EXPECT_EQ(table(), kTrainAfter) << "the pass after the throw writes the new table";
}

TEST(NothingEndsThePlugin, AReporterPassThatThrowsIsLoggedAndTheNextSends) {
  testing::GuardedCapture cap;
  FixedQuery query(profile("atlas800t-a2"));
  Config cfg;
  cfg.scheduler_url = "https://sched";
  RecordingScheduler sched;
  sched.put_answer = [](int n) -> Status {
    if (n == 1) throw std::runtime_error("reporter bug");
    return {};
  };
  auto plugin = Plugin::create(query, cfg, nullptr, &sched);
  ASSERT_TRUE(plugin.ok());
  TestClock clock;
  Reporter reporter(**plugin, sched, {30s, 10ms, 100ms, &clock});
  ASSERT_TRUE(clock.settle(1));
  EXPECT_EQ(clock.waits(), std::vector<TestClock::Steady::duration>{10ms}) << "the backoff after a throw";
  EXPECT_EQ(reporter.stats().accepted, 0);
  clock.advance(10ms);
  ASSERT_TRUE(sched.wait_puts(2, kEventually)) << "the reporter carried on after the throw";
  EXPECT_TRUE(eventually([&] { return reporter.stats().accepted == 1; }));
  EXPECT_EQ(
      cap.errors_with("inventory reporter: internal error: reporter bug (please report it); retrying").size(),
      1U);
}

// The handlers through a real gRPC server on a unix socket, as the kubelet calls them: a plugin that throws
// is answered INTERNAL with one line, and the next call is served.
TEST(NothingEndsThePlugin, AHandlerThatThrowsAnswersInternalAndTheNextCallIsServed) {
  testing::GuardedCapture cap;
  testing::TempDir tmp;
  FixedQuery query(profile("atlas800t-a2"));
  RecordingScheduler sched;
  Config cfg;
  cfg.scheduler_url = "https://sched";
  cfg.node_name = "node-1";
  cfg.ranktable_dir = tmp / "ranktables";
  auto plugin = Plugin::create(query, cfg, nullptr, &sched);
  ASSERT_TRUE(plugin.ok()) << plugin.error().message();
  Endpoint ep(**plugin, kChips, tmp.path(), nullptr);
  ASSERT_TRUE(ep.start().ok());
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix://" + ep.socket_path(), grpc::InsecureChannelCredentials()));
  auto allocate = [&](int phy) {
    v1beta1::AllocateResponse resp;
    grpc::Status st = testing::send_allocate(
        *stub, testing::allocate_request({{chip_ids(kChips, {phy}).at(0)}}), &resp, 5s);
    return std::make_pair(st, resp.container_responses_size());
  };
  auto preferred = [&] {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : chip_ids(kChips, {0, 1, 2, 3})) c->add_available_deviceids(id);
    c->set_allocation_size(2);
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    return stub->GetPreferredAllocation(&ctx, req, &resp);
  };

  sched.throw_from_calls = true;
  auto [st, n] = allocate(1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(st.error_message(), "huawei.com/Ascend910: Allocate: internal error: scheduler client bug");
  EXPECT_EQ(n, 0);
  grpc::Status pst = preferred();
  EXPECT_EQ(pst.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(pst.error_message(),
            "huawei.com/Ascend910: GetPreferredAllocation: internal error: scheduler client bug");
  EXPECT_EQ(cap.errors_with("huawei.com/Ascend910: Allocate: internal error: scheduler client bug (please "
                            "report it); answering INTERNAL")
                .size(),
            1U);
  EXPECT_EQ(cap.errors_with("GetPreferredAllocation: internal error").size(), 1U);

  sched.throw_from_calls = false;
  auto [st2, n2] = allocate(2);
  EXPECT_TRUE(st2.ok()) << st2.error_message();
  EXPECT_EQ(n2, 1);
  EXPECT_TRUE(preferred().ok());
  ep.stop();
}

}  // namespace
}  // namespace ascend::plugin
