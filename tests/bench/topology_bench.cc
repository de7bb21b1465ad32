// Topology allocator benchmarks (the targets in brackets):
//  - BM_Place/<policy>: place a 1024-NPU job (tp 8, pp 8, dp 16, pods of 8) on a 512-node Atlas 800T A2
//    cluster (16 nodes per leaf, 4 leaves per spine) with 30% of the chips busy [topo <= 20 ms]. first-fit
//    and volcano are the baselines in the same run; the counters give each policy's cost.total (quality).
//  - BM_Choose/<profile>: node-level choose() on random free sets of one host [<= 10 us].
//  - BM_Simulate/<policy>: replay 10 000 jobs on 4096 NPUs (512 nodes) [topo <= 30 s]; counters give the
//    queueing and placement statistics.
// The busy chips of the cluster come from earlier tenants placed the way a real cluster fills: whole-node
// jobs on random nodes and small jobs packed by the node-level rules, until 30% of the chips are in use.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "ascend/npu/profiles.h"
#include "ascend/topology/choose.h"
#include "ascend/topology/place.h"
#include "ascend/topology/simulate.h"
#include "splitmix.h"

namespace {

using namespace ascend::topology;

// A fixed, portable stream: the same seed gives the same cluster on every run.
using Rng = ascend::testing::SplitMix64;

Cluster fragmented_cluster(int nodes, double busy_fraction, std::uint64_t seed) {
  auto specs = generate_nodes("atlas800t-a2", nodes, 16, 4, "node-");
  auto host = ascend::npu::builtin_profile("atlas800t-a2");
  Rng rng{seed};
  std::vector<std::vector<int>> free(static_cast<std::size_t>(nodes), {0, 1, 2, 3, 4, 5, 6, 7});
  int busy = 0;
  const int target = static_cast<int>(busy_fraction * nodes * 8);
  while (busy < target) {
    int n = rng.below(nodes);
    auto& f = free[static_cast<std::size_t>(n)];
    if (rng.below(10) < 6) {
      if (f.size() != 8) continue;  // a whole-node tenant
      busy += 8;
      f.clear();
      continue;
    }
    static const int kSizes[] = {1, 2, 4};
    int size = kSizes[rng.below(3)];
    auto pick = choose(*host, f, {}, size);
    if (!pick.ok()) continue;
    for (int id : *pick) f.erase(std::find(f.begin(), f.end(), id));
    busy += size;
  }
  for (int i = 0; i < nodes; ++i) {
    for (int id = 0; id < 8; ++id) {
      const auto& f = free[static_cast<std::size_t>(i)];
      if (std::find(f.begin(), f.end(), id) == f.end()) specs[static_cast<std::size_t>(i)].busy.push_back(id);
    }
  }
  auto c = make_cluster("bench", {}, specs, builtin_profiles());
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.error().message().c_str());
    std::abort();
  }
  return std::move(c).value();
}

Job big_job() {
  Job j;
  j.name = "llama-1024";
  j.npus = 1024;
  j.tp = 8;
  j.pp = 8;
  j.dp = 16;
  j.comm = {1.0e9, 2.0e8, 4.4e9};
  return j;
}

void BM_Place(benchmark::State& state, Policy policy) {
  static const Cluster cluster = fragmented_cluster(512, 0.30, 42);
  const ClusterState free = ClusterState::initial(cluster);
  const Job job = big_job();
  Placement last;
  for (auto _ : state) {
    auto p = place(cluster, free, job, policy);
    if (!p.ok()) {
      state.SkipWithError(p.error().message().c_str());
      return;
    }
    last = std::move(p).value();
    benchmark::DoNotOptimize(last);
  }
  state.counters["cost_total_s"] = last.eval.cost.total;
  state.counters["cost_dp_s"] = last.eval.cost.dp;
  state.counters["cost_pp_s"] = last.eval.cost.pp;
  state.counters["tp_outside_hccs"] = last.eval.tp_groups_outside_hccs;
  state.counters["free_chips"] = free.free_chips();
}
BENCHMARK_CAPTURE(BM_Place, topo, Policy::kTopo)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Place, first_fit, Policy::kFirstFit)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Place, volcano, Policy::kVolcano)->Unit(benchmark::kMillisecond);

void BM_Choose(benchmark::State& state, const char* profile) {
  auto host = ascend::npu::builtin_profile(profile);
  Rng rng{7};
  struct Req {
    std::vector<int> free;
    int size = 0;
  };
  std::vector<Req> reqs;
  int n = static_cast<int>(host->chips.size());
  const bool a1 = host->family == ascend::npu::Family::k910;
  while (reqs.size() < 256) {
    Req r;
    for (int i = 0; i < n; ++i) {
      if (rng.below(3) != 0) r.free.push_back(host->chips[static_cast<std::size_t>(i)].phy_id);
    }
    static const int kA1[] = {1, 2, 4};
    r.size = a1 ? kA1[rng.below(3)] : 1 + rng.below(std::max(1, static_cast<int>(r.free.size())));
    if (static_cast<int>(r.free.size()) < r.size) continue;
    reqs.push_back(std::move(r));
  }
  std::size_t i = 0;
  for (auto _ : state) {
    const Req& r = reqs[i++ % reqs.size()];
    auto got = choose(*host, r.free, {}, r.size);
    benchmark::DoNotOptimize(got);
  }
}
BENCHMARK_CAPTURE(BM_Choose, atlas800t_a2, "atlas800t-a2")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Choose, atlas800_9000, "atlas800-9000")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Choose, atlas800t_a3, "atlas800t-a3")->Unit(benchmark::kMicrosecond);

// 10 000 jobs with the size mix of published GPU-cluster traces (most jobs small, a few very large),
// Poisson arrivals and log-normal run lengths; the load keeps a queue most of the time.
std::vector<TraceJob> synthetic_trace(int jobs, std::uint64_t seed) {
  Rng rng{seed};
  std::vector<TraceJob> out;
  double t = 0;
  struct Shape {
    int npus, tp, pp, weight;
  };
  static const Shape kShapes[] = {{1, 1, 1, 20},  {2, 2, 1, 10},  {4, 4, 1, 10}, {8, 8, 1, 18},
                                  {16, 8, 1, 10}, {32, 8, 2, 10}, {64, 8, 4, 9}, {128, 8, 4, 7},
                                  {256, 8, 8, 4}, {512, 8, 8, 2}};
  int total_weight = 0;
  for (const auto& s : kShapes) total_weight += s.weight;
  for (int i = 0; i < jobs; ++i) {
    int w = rng.below(total_weight);
    const Shape* s = kShapes;
    while (w >= s->weight) w -= (s++)->weight;
    TraceJob tj;
    tj.job.name = "job-" + std::to_string(i);
    tj.job.npus = s->npus;
    tj.job.tp = s->tp;
    tj.job.pp = s->pp;
    tj.job.dp = s->npus / (s->tp * s->pp);
    tj.job.comm = {1.0e9, 2.0e8, 4.4e9};
    t += -std::log(1 - rng.unit()) * 30.0;  // mean inter-arrival 30 s
    tj.arrival = t;
    tj.steps = static_cast<long long>(std::exp(7.0 + 1.2 * (rng.unit() + rng.unit() + rng.unit() - 1.5)));
    tj.step_compute_s = 1.0;
    out.push_back(std::move(tj));
  }
  return out;
}

void BM_Simulate(benchmark::State& state, Policy policy) {
  static const Cluster cluster = [] {
    auto specs = generate_nodes("atlas800t-a2", 512, 16, 4, "node-");
    return std::move(make_cluster("sim", {}, specs, builtin_profiles())).value();
  }();
  static const std::vector<TraceJob> trace = synthetic_trace(10000, 99);
  SimResult r;
  for (auto _ : state) {
    r = simulate(cluster, trace, {policy, false});
    benchmark::DoNotOptimize(r);
  }
  state.counters["completed"] = r.completed;
  state.counters["mean_wait_s"] = r.mean_wait_s;
  state.counters["makespan_s"] = r.makespan_s;
  state.counters["utilization"] = r.utilization;
  state.counters["mean_comm_cost_s"] = r.mean_comm_cost;
  state.counters["tp_outside_hccs"] = r.tp_groups_outside_hccs;
}
BENCHMARK_CAPTURE(BM_Simulate, topo, Policy::kTopo)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Simulate, first_fit, Policy::kFirstFit)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Simulate, volcano, Policy::kVolcano)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
