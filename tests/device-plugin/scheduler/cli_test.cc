// The ascend-scheduler binary: place / simulate / plan on the shipped fixtures, the outputs it writes, and
// its exit codes (2 naming file, line and field; 3 with {"error": ...} on stdout).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "ascend/common/fs.h"
#include "ascend/npu/profiles.h"
#include "ascend/scheduler/input.h"
#include "run_command.h"

namespace ascend::scheduler {
namespace {

namespace fs = std::filesystem;
using ascend::testing::run_command;
using nlohmann::json;

const std::string kBin = std::string(ASCEND_BIN_DIR) + "/ascend-scheduler";
const std::string kDir = std::string(ASCEND_FIXTURES) + "/scheduler";

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sched-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  fs::path dir_;
};

TEST_F(Cli, PlacesTheExampleJobAndWritesRankTableAndSvg) {
  std::string rt = (dir_ / "hccl.json").string();
  std::string svg = (dir_ / "job.svg").string();
  auto r = run_command({kBin, "place", "--cluster", kDir + "/pod-a.yaml", "--job", kDir + "/llama-70b.yaml",
                        "--ranktable", rt, "--svg", svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json p = json::parse(r.out);
  EXPECT_EQ(p["job"], "llama-70b");
  EXPECT_EQ(p["policy"], "topo");
  ASSERT_EQ(p["ranks"].size(), 64U);
  std::set<std::pair<std::string, int>> chips;
  for (int i = 0; i < 64; ++i) {
    const auto& rank = p["ranks"][static_cast<std::size_t>(i)];
    EXPECT_EQ(rank["rank"], i);
    EXPECT_EQ(rank["pod"], i / 8);
    EXPECT_TRUE(chips.insert({rank["node"].get<std::string>(), rank["device_id"].get<int>()}).second);
  }
  EXPECT_EQ(p["tp_groups_outside_hccs"], 0);
  // An empty 16-node leaf holds the 8 pods: TP on HCCS, DP and PP on the leaf.
  EXPECT_DOUBLE_EQ(p["cost"]["tp"].get<double>(), 2.0 * 7 / 8 * 1e9 / 56e9);
  EXPECT_DOUBLE_EQ(p["cost"]["dp"].get<double>(), 2.0 * 1 / 2 * 4.4e9 / 25e9);
  EXPECT_DOUBLE_EQ(p["cost"]["pp"].get<double>(), 2e8 / 25e9);
  auto table = read_file(rt);
  ASSERT_TRUE(table.ok());
  json t = json::parse(*table);
  EXPECT_EQ(t["version"], "1.0");
  EXPECT_EQ(t["server_count"], "8");
  EXPECT_EQ(t["server_list"][0]["server_id"], p["ranks"][0]["node"]);
  EXPECT_EQ(t["server_list"][0]["device"][0]["rank_id"], "0");
  // pod-a's node-003 is node index 3: its device IPs follow hccn.conf's convention for node 3.
  for (const auto& server : t["server_list"]) {
    int node = std::stoi(server["server_id"].get<std::string>().substr(5));
    for (const auto& d : server["device"]) {
      EXPECT_EQ(d["device_ip"], npu::device_ip(node, std::stoi(d["device_id"].get<std::string>())));
    }
  }
  auto pic = read_file(svg);
  ASSERT_TRUE(pic.ok());
  EXPECT_EQ(pic->rfind("<?xml", 0), 0U);
  EXPECT_NE(pic->find("llama-70b"), std::string::npos);
}

TEST_F(Cli, EveryPolicyPlacesTheSuiteJobs) {
  for (const char* policy : {"topo", "first-fit", "volcano"}) {
    auto r = run_command({kBin, "place", "--cluster", kDir + "/suite/cluster-00.yaml", "--job",
                          kDir + "/suite/job-01-llama-7b-dp4.yaml", "--policy", policy});
    ASSERT_EQ(r.exit_code, 0) << policy << ": " << r.err;
    EXPECT_EQ(json::parse(r.out)["policy"], policy);
  }
  auto bad = run_command({kBin, "place", "--cluster", kDir + "/pod-a.yaml", "--job", kDir + "/llama-70b.yaml",
                          "--policy", "best"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--policy: unknown policy 'best'"), std::string::npos) << bad.err;
}

// Bad input exits 2 with one line naming the file, the line and the field.
TEST_F(Cli, BadFilesNameFileLineAndField) {
  std::string job = kDir + "/llama-70b.yaml";
  struct Case {
    const char* name;
    const char* text;
    bool is_job;
    const char* want;  // after "<path>: "
  };
  const Case cases[] = {
      {"chip.yaml",
       "name: c\nnodes:\n  - {name: a, profile: atlas800t-a2, leaf: l0}\n  - name: b\n    profile: "
       "atlas800t-a2\n    leaf: l0\n    busy: [1, 12]\n",
       false, "line 7: nodes[1].busy[1]: chip 12 is not on atlas800t-a2 (phy ids 0-7)"},
      {"unknown.yaml", "name: c\nnodes:\n  - {name: a, profile: atlas800t-a2, leaf: l0, rack: 3}\n", false,
       "line 3: nodes[0].rack: unknown field"},
      {"noleaf.yaml", "name: c\nnodes:\n  - {name: a, profile: atlas800t-a2}\n", false,
       "line 3: nodes[0].leaf: required field is missing"},
      {"profile.yaml", "nodes:\n  - {name: a, profile: atlas900, leaf: l0}\n", false,
       "line 2: nodes[0].profile: "},
      {"bw.yaml", "bandwidth_gbps:\n  leaf: fast\nnodes:\n  - {name: a, profile: atlas800t-a2, leaf: l0}\n",
       false, "line 2: bandwidth_gbps.leaf: expected a number, found a string"},
      {"gen.yaml", "generate:\n  - {profile: atlas800t-a2, count: 4, nodes_per_leaf: 0}\n", false,
       "line 2: generate[0].nodes_per_leaf: 0 is out of range"},
      {"syntax.yaml", "name: c\nnodes: [\n  {name: a\n", false, "line "},
      {"job.yaml", "name: j\nnpus: 64\ntp: 8\npp: 4\ndp: 4\ncomm_bytes: {tp: 1e9}\n", true,
       "line 2: npus: 64 is not tp x pp x dp = 8 x 4 x 4"},
      {"job2.yaml",
       "name: j\nnpus: 8\ntp: 8\nmodel:\n  params: 7e9\n  layers: 32\n  hidden: big\n  seq_len: 4096\n", true,
       "line 7: model.hidden: expected an integer"},
      {"job3.yaml", "name: j\nnpus: 8\norder: dp-tp-pp\ncomm_bytes: {tp: 1e9}\n", true,
       "line 3: order: unknown rank order 'dp-tp-pp'"},
  };
  for (const auto& k : cases) {
    std::string path = write(k.name, k.text);
    auto r = k.is_job ? run_command({kBin, "place", "--cluster", kDir + "/pod-a.yaml", "--job", path})
                      : run_command({kBin, "place", "--cluster", path, "--job", job});
    EXPECT_EQ(r.exit_code, 2) << k.name << ": " << r.err;
    EXPECT_NE(r.err.find(path + ": " + k.want), std::string::npos) << k.name << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
    EXPECT_TRUE(r.out.empty());
  }
  auto missing = run_command({kBin, "place", "--cluster", (dir_ / "nope.yaml").string(), "--job", job});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.yaml"), std::string::npos) << missing.err;
  auto usage = run_command({kBin, "place", "--cluster", kDir + "/pod-a.yaml"});
  EXPECT_EQ(usage.exit_code, 2);
}

TEST_F(Cli, InfeasibleExits3WithErrorJson) {
  std::string job = write("big.yaml", "name: huge\nnpus: 2048\ntp: 8\ncomm_bytes: {tp: 1e9}\n");
  auto r = run_command({kBin, "place", "--cluster", kDir + "/pod-a.yaml", "--job", job});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  json e = json::parse(r.out);
  ASSERT_TRUE(e.contains("error"));
  EXPECT_NE(e["error"].get<std::string>().find("needs 2048 NPUs; 1024 are free"), std::string::npos) << r.out;
  // Volcano cannot express pods of 4 for a distributed Ascend 910 job: infeasible for that policy.
  std::string a1 = write("a1.yaml", "generate:\n  - {profile: atlas800-9000, count: 4}\n");
  std::string j4 = write("j4.yaml", "name: x\nnpus: 16\ntp: 4\nnpus_per_pod: 4\ncomm_bytes: {tp: 1e9}\n");
  auto v = run_command({kBin, "place", "--cluster", a1, "--job", j4, "--policy", "volcano"});
  EXPECT_EQ(v.exit_code, 3);
  EXPECT_NE(json::parse(v.out)["error"].get<std::string>().find("8 x N"), std::string::npos);
  auto t = run_command({kBin, "place", "--cluster", a1, "--job", j4});
  EXPECT_EQ(t.exit_code, 0) << t.err;
}

TEST_F(Cli, UnwritableOutputExits1) {
  auto r = run_command({kBin, "place", "--cluster", kDir + "/pod-a.yaml", "--job", kDir + "/llama-70b.yaml",
                        "--ranktable", (dir_ / "no" / "such" / "dir" / "hccl.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("rank table"), std::string::npos) << r.err;
}

TEST_F(Cli, SimulatesTheShippedTrace) {
  std::map<std::string, json> got;
  for (const char* policy : {"topo", "first-fit", "volcano"}) {
    auto r = run_command({kBin, "simulate", "--cluster", kDir + "/pod-a.yaml", "--trace",
                          kDir + "/trace.yaml", "--policy", policy});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json s = json::parse(r.out);
    for (const char* key : {"policy", "jobs", "completed", "mean_wait_s", "p95_wait_s", "makespan_s",
                            "utilization", "mean_comm_cost", "tp_groups_outside_hccs"}) {
      EXPECT_TRUE(s.contains(key)) << key;
    }
    EXPECT_EQ(s["jobs"], 240);
    EXPECT_EQ(s["completed"], 240) << "every job of the trace fits pod-a";
    EXPECT_GT(s["makespan_s"].get<double>(), 86400 * 0.5);
    EXPECT_GT(s["utilization"].get<double>(), 0.05);
    EXPECT_LE(s["utilization"].get<double>(), 1.0);
    got[policy] = s;
  }
  EXPECT_LE(got["topo"]["mean_comm_cost"].get<double>(), got["first-fit"]["mean_comm_cost"].get<double>());
  EXPECT_LE(got["topo"]["mean_comm_cost"].get<double>(), got["volcano"]["mean_comm_cost"].get<double>());
  EXPECT_EQ(got["topo"]["tp_groups_outside_hccs"], 0);
  auto bf = run_command(
      {kBin, "simulate", "--cluster", kDir + "/pod-a.yaml", "--trace", kDir + "/trace.yaml", "--backfill"});
  ASSERT_EQ(bf.exit_code, 0) << bf.err;
  EXPECT_LE(json::parse(bf.out)["mean_wait_s"].get<double>(), got["topo"]["mean_wait_s"].get<double>());
  std::string bad = write("t.yaml", "jobs:\n  - {name: a, npus: 8, comm_bytes: {tp: 1}, arrival: 5}\n");
  auto e = run_command({kBin, "simulate", "--cluster", kDir + "/pod-a.yaml", "--trace", bad});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find(bad + ": line 2: jobs[0].duration: give duration, or steps and step_compute_s"),
            std::string::npos)
      << e.err;
}

TEST_F(Cli, Plan) {
  const std::vector<std::string> model = {"--params", "10e9",    "--layers", "40",        "--hidden",
                                          "5120",     "--heads", "40",       "--seq-len", "4096"};
  auto args = [&](const char* npus, bool json_out) {
    std::vector<std::string> a = {kBin, "plan", "--npus", npus, "--chip", "910B3"};
    a.insert(a.end(), model.begin(), model.end());
    if (json_out) a.emplace_back("--json");
    return a;
  };
  auto eight = run_command(args("8", true));
  ASSERT_EQ(eight.exit_code, 0) << eight.err;
  json p = json::parse(eight.out);
  EXPECT_EQ(p["peak_tflops_bf16"], 313);
  const json& best = p["candidates"][0];
  EXPECT_TRUE(best["fits"].get<bool>());
  EXPECT_GE(best["tp"].get<int>(), 2);  // the example: tensor parallelism inside the node first
  for (const char* k : {"compute", "bubble", "tp", "pp", "dp_exposed", "total"}) {
    EXPECT_TRUE(best["step_s"].contains(k)) << k;
  }
  EXPECT_GT(best["mfu"].get<double>(), 0);
  auto one = run_command(args("1", true));
  EXPECT_EQ(one.exit_code, 3);
  json q = json::parse(one.out);
  EXPECT_NE(q["error"].get<std::string>().find("no (tp, pp, dp) of 1 x 910B3 fits"), std::string::npos);
  EXPECT_FALSE(q["candidates"][0]["fits"].get<bool>());
  auto text = run_command(args("8", false));
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("does not fit:"), std::string::npos);
  EXPECT_NE(text.out.find("8 x 910B3 (atlas800t-a2, 64.0 GiB HBM, 313 TFLOPS bf16 at 60% efficiency)"),
            std::string::npos)
      << text.out;
  struct Bad {
    std::vector<std::string> extra;
    const char* message;
  };
  const Bad bad[] = {
      {{"--recompute", "some"}, "--recompute: unknown recompute 'some' (use none, selective or full)"},
      {{"--vocab", "1000000"}, "leaves nothing for the layers"},
      {{"--place", "job.yaml"}, "--place requires --cluster"},
  };
  for (const auto& b : bad) {
    auto a = args("8", false);
    a.insert(a.end(), b.extra.begin(), b.extra.end());
    auto r = run_command(a);
    EXPECT_EQ(r.exit_code, 2) << b.message;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << r.err;
  }
  auto h100 = run_command({kBin, "plan", "--npus", "8", "--chip", "H100", "--params", "1e9", "--layers", "2",
                           "--hidden", "64", "--heads", "4", "--seq-len", "128"});
  EXPECT_EQ(h100.exit_code, 2);
  EXPECT_NE(h100.err.find("unknown chip 'H100'"), std::string::npos);
}

// A chip file describes other hardware; errors name the file, line and field.
TEST_F(Cli, PlanWithAChipFile) {
  std::string chip = write("a100.yaml",
                           "name: A100-80GB\nhbm_gib: 80\npeak_tflops_bf16: 312\nchips_per_node: 8\n"
                           "bandwidth_gbps: {intra_node: 300, inter_node: 25}\n");
  auto r = run_command({kBin,
                        "plan",
                        "--npus",
                        "16",
                        "--chip",
                        chip,
                        "--params",
                        "13e9",
                        "--layers",
                        "40",
                        "--hidden",
                        "5120",
                        "--heads",
                        "40",
                        "--seq-len",
                        "4096",
                        "--sequence-parallel",
                        "--recompute",
                        "selective",
                        "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json p = json::parse(r.out);
  EXPECT_EQ(p["chip"], "A100-80GB");
  EXPECT_EQ(p["hbm_gib"], 80);
  EXPECT_EQ(p["options"]["recompute"], "selective");
  std::string bad = write("bad.yaml", "name: X\nhbm_gib: 80\npeak_tflops_bf16: -1\nchips_per_node: 8\n");
  auto e = run_command({kBin, "plan", "--npus", "16", "--chip", bad, "--params", "13e9", "--layers", "40",
                        "--hidden", "5120", "--heads", "40", "--seq-len", "4096"});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("--chip: " + bad + ": line 3: peak_tflops_bf16: must be positive"), std::string::npos)
      << e.err;
}

// --place: the planner's choice placed on a real cluster file, and the job file it writes is the one
// `place` takes, giving the same placement cost.
TEST_F(Cli, PlanPlacesItsBestLayout) {
  std::string job = (dir_ / "planned.yaml").string();
  auto r = run_command({kBin,
                        "plan",
                        "--npus",
                        "16",
                        "--chip",
                        "910B3",
                        "--params",
                        "13e9",
                        "--layers",
                        "40",
                        "--hidden",
                        "5120",
                        "--heads",
                        "40",
                        "--seq-len",
                        "4096",
                        "--sequence-parallel",
                        "--recompute",
                        "selective",
                        "--cluster",
                        kDir + "/pod-a.yaml",
                        "--place",
                        job,
                        "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json p = json::parse(r.out);
  ASSERT_TRUE(p.contains("placement"));
  EXPECT_EQ(p["placed"]["job_file"], job);
  auto placed = run_command({kBin, "place", "--cluster", kDir + "/pod-a.yaml", "--job", job});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  json again = json::parse(placed.out);
  EXPECT_EQ(again["ranks"], p["placement"]["ranks"]);
  EXPECT_DOUBLE_EQ(again["cost"]["total"].get<double>(), p["placement"]["cost"]["total"].get<double>());
  int rank = p["placed"]["rank"];
  const json& chosen = p["candidates"][static_cast<std::size_t>(rank - 1)];
  auto job_file = load_job(job);
  ASSERT_TRUE(job_file.ok()) << job_file.error().message();
  EXPECT_EQ(job_file->tp, chosen["tp"].get<int>());
  EXPECT_EQ(job_file->pp, chosen["pp"].get<int>());
  EXPECT_DOUBLE_EQ(job_file->comm.tp, chosen["comm_bytes"]["tp"].get<double>());
  auto text = run_command({kBin,       "plan", "--npus",    "16",   "--chip",    "910B3",
                           "--params", "13e9", "--layers",  "40",   "--hidden",  "5120",
                           "--heads",  "40",   "--seq-len", "4096", "--cluster", kDir + "/pod-a.yaml",
                           "--place",  job});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("job written to " + job), std::string::npos) << text.out;
}

TEST_F(Cli, HelpDocumentsExitCodes) {
  for (const std::vector<std::string>& a : {std::vector<std::string>{kBin, "--help"},
                                            {kBin, "place", "--help"},
                                            {kBin, "simulate", "--help"},
                                            {kBin, "plan", "--help"}}) {
    auto r = run_command(a);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("Exit codes"), std::string::npos) << r.out;
  }
}

// The loader resolves custom profile files relative to the cluster file.
TEST_F(Cli, CustomProfileNextToTheClusterFile) {
  write("lab.yaml", "base: atlas800t-a2\nprofile: lab-a2\nchips:\n  - {phy_id: 3, hccs_domain: 1}\n");
  std::string c = write("c.yaml", "nodes:\n  - {name: a, profile: ./lab.yaml, leaf: l0, busy: [7]}\n");
  auto cluster = load_cluster(c);
  ASSERT_TRUE(cluster.ok()) << cluster.error().message();
  EXPECT_EQ(cluster->type_of(0).profile, "lab-a2");
  EXPECT_EQ(cluster->level(0, 0, 0, 3), topology::Level::kPcie);  // chip 3 left the mesh's domain
}

// plan --measured: step times that plan itself predicts at efficiency 0.5 are fitted back to 0.5 and a
// communication factor of 1; the calibration is reported (JSON and text); a bad row is named by file and
// line.
TEST_F(Cli, PlanMeasuredFitsTheFactorsToTheGivenTimes) {
  std::string chip =
      write("mesh.yaml",
            "name: mesh8\nhbm_gib: 64\npeak_tflops_bf16: 313\nchips_per_node: 8\n"
            "interconnect: {library: hccl, domain: {links: 7, link_gbps: 56, fabric: full_mesh},"
            " nic: {links: 1, link_gbps: 25}}\n");
  std::vector<std::string> a = {kBin,       "plan", "--npus",    "16",   "--chip",         chip,
                                "--params", "13e9", "--layers",  "40",   "--hidden",       "5120",
                                "--heads",  "40",   "--seq-len", "4096", "--global-batch", "64"};
  auto at_half = a;
  at_half.insert(at_half.end(), {"--efficiency", "0.5", "--json"});
  auto base = run_command(at_half);
  ASSERT_EQ(base.exit_code, 0) << base.err;
  std::string csv = "# step times\ntp,pp,dp,v,step_seconds\n";
  std::set<std::pair<int, int>> seen;
  json planned = json::parse(base.out);
  for (const auto& c : planned["candidates"]) {
    if (!c["fits"].get<bool>() || !seen.insert({c["tp"].get<int>(), c["pp"].get<int>()}).second) continue;
    char line[128];
    std::snprintf(line, sizeof line, "%d,%d,%d,%d,%.17g\n", c["tp"].get<int>(), c["pp"].get<int>(),
                  c["dp"].get<int>(), c["v"].get<int>(), c["step_s"]["total"].get<double>());
    csv += line;
    if (seen.size() == 3) break;
  }
  ASSERT_EQ(seen.size(), 3U);
  std::string measured = write("m.csv", csv);
  auto fitted = a;
  fitted.insert(fitted.end(), {"--measured", measured, "--json"});
  auto r = run_command(fitted);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json p = json::parse(r.out);
  EXPECT_NEAR(p["calibration"]["efficiency"].get<double>(), 0.5, 1e-6);
  EXPECT_NEAR(p["calibration"]["comm_factor"].get<double>(), 1.0, 1e-6);
  EXPECT_LT(p["calibration"]["rms_s"].get<double>(), 1e-6);
  EXPECT_EQ(p["calibration"]["rows"].size(), 3U);
  EXPECT_EQ(p["calibration"]["rows"][0]["line"], 3);
  EXPECT_EQ(p["efficiency"], p["calibration"]["efficiency"]);
  auto text = a;
  text.insert(text.end(), {"--measured", measured});
  auto t = run_command(text);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("calibrated to " + measured +
                       " (3 measured layouts, least squares): compute efficiency 0.5,"),
            std::string::npos)
      << t.out;
  std::string bad = write("bad.csv", "tp,pp,dp,step_seconds\n1,1,16,20\n8,2,x,30\n");
  auto b = a;
  b.insert(b.end(), {"--measured", bad});
  auto e = run_command(b);
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("--measured: " + bad + ":3: dp 'x' is not a positive integer"), std::string::npos)
      << e.err;
  std::string one = write("one.csv", "tp,pp,dp,step_seconds\n8,2,1,20\n");
  b.back() = one;
  e = run_command(b);
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("1 measured layout; at least 2"), std::string::npos) << e.err;
}

// simulate --faults: the same MTBF and seed give the same replay; pod and job recovery side by side; a bad
// value is exit 2.
TEST_F(Cli, SimulateWithFaultsReportsBothRecoveries) {
  std::vector<std::string> a = {kBin,
                                "simulate",
                                "--cluster",
                                kDir + "/pod-a.yaml",
                                "--trace",
                                kDir + "/trace.yaml",
                                "--faults",
                                "2000,3",
                                "--checkpoint-minutes",
                                "30"};
  auto r1 = run_command(a);
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  auto r2 = run_command(a);
  EXPECT_EQ(r1.out, r2.out);
  json f = json::parse(r1.out)["faults"];
  EXPECT_EQ(f["mtbf_hours"], 2000);
  EXPECT_EQ(f["seed"], 3);
  EXPECT_EQ(f["checkpoint_s"], 1800);
  EXPECT_EQ(f["repair_s"], 4 * 3600);
  for (const char* mode : {"pod", "job"}) {
    const json& s = f[mode];
    EXPECT_GT(s["faults"].get<int>(), 0) << mode;
    EXPECT_EQ(s["completed"], 240) << mode;
    EXPECT_NEAR(s["lost_chip_hours"].get<double>(),
                s["held_chip_hours"].get<double>() - s["useful_chip_hours"].get<double>(), 1e-6);
    EXPECT_LE(s["goodput"].get<double>(), 1.0);
  }
  for (const char* bad : {"0", "x,1", "100,-"}) {
    auto b = a;
    b[7] = bad;
    auto e = run_command(b);
    EXPECT_EQ(e.exit_code, 2) << bad;
    EXPECT_NE(e.err.find("is not MTBF_HOURS[,SEED]"), std::string::npos) << e.err;
  }
}

}  // namespace
}  // namespace ascend::scheduler
