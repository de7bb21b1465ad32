// The whole loop, end to end, as root: four emulated nodes, four device plugins reporting to one scheduler,
// and a driver playing kube-scheduler and the kubelets for a 4-pod job, whose containers then start with
// runc through ascend-docker-runtime. Each container must see exactly the chips the scheduler reserved for
// its pod, and read a rank table whose entries for its node are those chips with its ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "ascend/npu/emulator.h"
#include "loop.h"

namespace ascend::loop {
namespace {

namespace ht = ascend::hook::testing;
using nlohmann::json;

json job_pod(const std::string& job, int index, int chips, const std::string& parallel, int pods) {
  return {
      {"metadata",
       {{"name", job + "-" + std::to_string(index)},
        {"namespace", "default"},
        {"uid", "uid-" + job + std::to_string(index)},
        {"annotations",
         {{"ascend.huawei.com/job", job},
          {"ascend.huawei.com/job-pods", std::to_string(pods)},
          {"ascend.huawei.com/parallel", parallel}}}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "trainer"},
                       {"resources", {{"limits", {{"huawei.com/Ascend910", std::to_string(chips)}}}}}}})}}}};
}

json plain_pod(const std::string& name, int chips) {
  json p = job_pod(name, 0, chips, "tp=1", 1);
  p["metadata"]["name"] = name;
  p["metadata"].erase("annotations");
  return p;
}

std::map<std::string, std::string> expected_nodes(const std::string& root, const std::vector<int>& phys) {
  auto s = npu::Emulator(root).read_state().value();
  auto text = [](int maj, int min) { return "c " + std::to_string(maj) + ":" + std::to_string(min); };
  std::map<std::string, std::string> want;
  for (int id : phys) want["/dev/davinci" + std::to_string(id)] = text(s.majors.davinci, id);
  want["/dev/davinci_manager"] = text(s.majors.manager, 0);
  want["/dev/devmm_svm"] = text(s.majors.svm, 0);
  want["/dev/hisi_hdc"] = text(s.majors.hdc, 0);
  return want;
}

// (device_id, rank_id) of `node` in a rank table, by device id.
std::vector<std::pair<int, int>> entries_of(const json& rt, const std::string& node) {
  std::vector<std::pair<int, int>> out;
  for (const auto& s : rt["server_list"]) {
    if (s["server_id"] != node) continue;
    for (const auto& d : s["device"]) {
      out.emplace_back(std::stoi(d["device_id"].get<std::string>()),
                       std::stoi(d["rank_id"].get<std::string>()));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

class KubernetesLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (device nodes, runc)";
    if (!ht::have_program("runc")) FAIL() << "runc is not installed (scripts/deps installs it)";
    if (::access("/bin/busybox", X_OK) != 0)
      FAIL() << "busybox-static is not installed (scripts/deps installs it)";
  }
  ht::TempDir tmp_{"loop"};
};

TEST_F(KubernetesLoop, AFourPodJobGetsExactlyItsReservedChipsAndAMatchingRankTable) {
  Loop loop(tmp_.path(), 4);
  ASSERT_EQ(loop.error(), "");
  // A pod without a job first: it takes 2 chips somewhere, through the same loop.
  Scheduled solo = loop.schedule(plain_pod("solo", 2));
  ASSERT_NE(solo.node, "") << solo.filter.dump();
  ASSERT_EQ(solo.bind_error, "");
  Admitted sa = loop.admit(solo.node, 2);
  ASSERT_TRUE(sa.ok) << sa.error;
  Started ss = loop.start(solo.node, sa.response, "solo");
  ASSERT_EQ(ss.output.exit_code, 0) << ss.output.err;
  EXPECT_EQ(ss.probe.devices.size(), 2U + 3U);
  EXPECT_TRUE(ss.env.empty()) << "a pod without a job gets no launch variables";

  // The job: 16 NPUs as TP 4 x PP 2 x DP 2, four pods of four.
  const int kPods = 4;
  std::vector<std::string> node_of(kPods);
  for (int i = 0; i < kPods; ++i) {
    Scheduled s = loop.schedule(job_pod("train", i, 4, "tp=4,pp=2,dp=2", kPods));
    ASSERT_NE(s.node, "") << s.filter.dump();
    EXPECT_EQ(s.filter["NodeNames"].size(), 1U) << "a job pod passes only on its reserved node";
    EXPECT_EQ(s.bind_error, "");
    node_of[static_cast<std::size_t>(i)] = s.node;
  }
  json placement = loop.get("/v1/jobs/default/train/placement");
  ASSERT_EQ(placement["pods"].size(), 4U) << placement.dump();
  json want_rt = loop.get("/v1/jobs/default/train/ranktable");
  for (int i = 0; i < kPods; ++i) {
    const std::string& node = node_of[static_cast<std::size_t>(i)];
    std::vector<int> reserved = placement["pods"][i]["chips"];
    ASSERT_EQ(placement["pods"][i]["node"], node);
    Admitted a = loop.admit(node, 4);
    ASSERT_TRUE(a.ok) << "pod " << i << ": " << a.error;
    std::vector<std::string> want_ids;
    for (int p : reserved) want_ids.push_back("Ascend910-" + std::to_string(p));
    EXPECT_EQ(a.preferred, want_ids) << "GetPreferredAllocation returns the reservation";
    Started c = loop.start(node, a.response, "train" + std::to_string(i));
    ASSERT_EQ(c.output.exit_code, 0) << c.output.err;
    ASSERT_TRUE(c.probe.started) << c.output.out;
    // Exactly the reserved chips, as device nodes and as npu-smi inside the container sees them.
    EXPECT_EQ(c.probe.devices, expected_nodes(loop.host_root(loop.node_index(node)), reserved))
        << "pod " << i;
    EXPECT_EQ(ht::smi_ids(c.probe.smi), std::set<int>(reserved.begin(), reserved.end())) << c.output.out;
    // Its launch variables: pod i holds ranks 4i .. 4i+3 of 16.
    std::map<std::string, std::string> want_env = {{"ASCEND_JOB", "train"},
                                                   {"RANK_TABLE_FILE", "/etc/ascend/hccl.json"},
                                                   {"RANK_SIZE", "16"},
                                                   {"WORLD_SIZE", "16"},
                                                   {"RANK_START", std::to_string(4 * i)},
                                                   {"NODE_RANK", std::to_string(i)},
                                                   {"NNODES", "4"},
                                                   {"NPROC_PER_NODE", "4"}};
    EXPECT_EQ(c.env, want_env);
    // The rank table it reads is the job's, and its node's entries are its chips with its ranks in
    // device_id order (entries of other pods on the same node excluded).
    json rt = json::parse(c.ranktable, nullptr, false);
    ASSERT_TRUE(rt.is_object()) << c.ranktable;
    EXPECT_EQ(rt, want_rt);
    std::vector<std::pair<int, int>> mine;
    for (auto [dev, rank] : entries_of(rt, node)) {
      if (std::find(reserved.begin(), reserved.end(), dev) != reserved.end()) mine.emplace_back(dev, rank);
    }
    std::vector<std::pair<int, int>> want_entries;
    for (int k = 0; k < 4; ++k) want_entries.emplace_back(reserved[static_cast<std::size_t>(k)], 4 * i + k);
    EXPECT_EQ(mine, want_entries) << "pod " << i << " on " << node;
  }
  json view = loop.get("/v1/cluster");
  EXPECT_EQ(view["jobs"][0]["allocated"], 4) << "every pod told the scheduler it got its chips";
}

TEST_F(KubernetesLoop, AFaultOnAReservedChipBeforeAllocateFailsThatPodWithAReasonAndNothingElseChanges) {
  Loop loop(tmp_.path(), 1);
  ASSERT_EQ(loop.error(), "");
  Scheduled s = loop.schedule(job_pod("one", 0, 4, "tp=4", 1));
  ASSERT_EQ(s.node, "node-0");
  ASSERT_EQ(s.bind_error, "");
  std::vector<int> reserved = loop.get("/v1/jobs/default/one/placement")["pods"][0]["chips"];
  ASSERT_EQ(reserved.size(), 4U);
  // A SeparateNPU fault (80E18402 in the plugin's fault-code table) on one reserved chip; the plugin reports
  // it.
  auto f = ht::run({ht::bin("npu-sim"), "fault", "set", "--root", loop.host_root(0), "--device",
                    std::to_string(reserved[1]), "--code", "0x80E18402", "--severity", "critical"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  ASSERT_TRUE(loop.wait_reported_unhealthy("node-0", 1, 5000));
  json before = loop.get("/v1/cluster");
  Admitted a = loop.admit("node-0", 4);
  ASSERT_FALSE(a.ok) << "the kubelet offered 7 healthy chips; the plugin must refuse the substitute";
  EXPECT_NE(a.error.find("unhealthy now: " + std::to_string(reserved[1])), std::string::npos) << a.error;
  EXPECT_EQ(loop.get("/v1/cluster"), before) << "nothing else changes";
  EXPECT_EQ(loop.get("/v1/nodes/node-0/reservations")["reservations"].size(), 1U);
}

}  // namespace
}  // namespace ascend::loop
