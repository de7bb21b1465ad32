// The generated suite of fragmented cluster states (tests/fixtures/scheduler/suite): every job on every
// state with the three policies. topo's mean total cost must be at most 0.7 x first-fit's and 0.85 x
// Volcano's, and topo must leave no TP group outside HCCS whenever a placement without any exists (decided
// here independently of the placer). Also checks that the committed fixtures are the generator's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <filesystem>
#include <map>

#include "ascend/common/fs.h"
#include "ascend/scheduler/input.h"
#include "ascend/topology/place.h"
#include "fixture_gen.h"

namespace ascend::scheduler {
namespace {

namespace fs = std::filesystem;
using topology::Policy;

const std::string kDir = std::string(ASCEND_FIXTURES) + "/scheduler";

std::vector<std::string> files(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir + "/suite")) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether the free chips can hold the job with every TP group inside one HCCS domain of one node: pods are
// independent, so it is enough that the nodes together hold enough units (a pod, or the pods of one TP
// group), each made of whole TP blocks that each fit one domain.
bool clean_placement_exists(const topology::Cluster& c, const topology::ClusterState& s,
                            const topology::Job& j) {
  int n = topology::pod_size_of(j, c);
  if (j.tp < 2) return true;
  int unit = n;
  if (j.tp > n) {
    if (j.tp % n != 0) return false;
    unit = j.tp;
  } else if (n % j.tp != 0) {
    return false;
  }
  int needed = j.npus / unit;
  int blocks_per_unit = unit / j.tp;
  int units = 0;
  for (std::size_t node = 0; node < c.nodes.size(); ++node) {
    const auto& t = c.type_of(static_cast<int>(node));
    int blocks = 0;
    for (auto d : t.domain_masks) {
      if (t.domain[static_cast<std::size_t>(std::countr_zero(d))] < 0) continue;  // no HCCS
      blocks += std::popcount(s.free[node] & d) / j.tp;
    }
    units += blocks / blocks_per_unit;
  }
  return units >= needed;
}

TEST(Suite, FixturesAreTheGeneratorsOutput) {
  auto want = testing::generate_fixtures();
  ASSERT_GE(want.size(), 30U);
  for (const auto& f : want) {
    auto have = read_file(kDir + "/" + f.path);
    ASSERT_TRUE(have.ok()) << f.path << ": " << have.error().message()
                           << " (run scheduler_fixture_gen tests/fixtures/scheduler)";
    EXPECT_EQ(*have, f.text) << f.path << " differs from the generator (run scheduler_fixture_gen)";
  }
}

TEST(Suite, TopoBeatsFirstFitAndVolcano) {
  auto clusters = files("cluster-");
  auto jobs = files("job-");
  ASSERT_GE(clusters.size(), 20U);
  ASSERT_GE(jobs.size(), 6U);
  double t_ff = 0, ff = 0, t_vc = 0, vc = 0;
  int n_ff = 0, n_vc = 0, infeasible = 0, clean_cases = 0, pairs = 0;
  std::map<std::string, std::array<double, 3>> per_job;  // topo, first-fit, volcano totals (all three placed)
  for (const auto& cf : clusters) {
    auto c = load_cluster(cf);
    ASSERT_TRUE(c.ok()) << c.error().message();
    topology::ClusterState s = topology::ClusterState::initial(*c);
    for (const auto& jf : jobs) {
      auto j = load_job(jf);
      ASSERT_TRUE(j.ok()) << j.error().message();
      ++pairs;
      auto t = topology::place(*c, s, *j, Policy::kTopo);
      auto f = topology::place(*c, s, *j, Policy::kFirstFit);
      auto v = topology::place(*c, s, *j, Policy::kVolcano);
      if (!t.ok()) {
        EXPECT_FALSE(f.ok()) << cf << " " << jf << ": first-fit places what topo cannot";
        ++infeasible;
        continue;
      }
      if (clean_placement_exists(*c, s, *j)) {
        ++clean_cases;
        EXPECT_EQ(t->eval.tp_groups_outside_hccs, 0) << cf << " " << jf << ": a clean placement exists";
      }
      if (f.ok()) {
        t_ff += t->eval.cost.total;
        ff += f->eval.cost.total;
        ++n_ff;
      }
      if (v.ok()) {
        t_vc += t->eval.cost.total;
        vc += v->eval.cost.total;
        ++n_vc;
      }
      if (f.ok() && v.ok()) {
        auto& pj = per_job[fs::path(jf).filename().string()];
        pj[0] += t->eval.cost.total;
        pj[1] += f->eval.cost.total;
        pj[2] += v->eval.cost.total;
      }
    }
  }
  std::printf(
      "suite: %d pairs, %d infeasible; %d with first-fit, %d with volcano; %d where a clean placement "
      "exists\n",
      pairs, infeasible, n_ff, n_vc, clean_cases);
  std::printf("suite: mean total topo/first-fit = %.3f, topo/volcano = %.3f\n", t_ff / ff, t_vc / vc);
  for (const auto& [job, v] : per_job) {
    std::printf("  %-40s topo/first-fit %.3f  topo/volcano %.3f\n", job.c_str(), v[0] / v[1], v[0] / v[2]);
  }
  EXPECT_GE(n_ff, 100);
  EXPECT_GE(n_vc, 60);
  EXPECT_LE(t_ff / ff, 0.7);
  EXPECT_LE(t_vc / vc, 0.85);
}

}  // namespace
}  // namespace ascend::scheduler
