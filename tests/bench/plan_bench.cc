// Planner benchmark (the target in brackets): `plan` for 4096 NPUs of 910B3 over every
// (tp, pp, dp, v) [< 1 s]. Two models:
//  - BM_Plan/llama70b: 70B, 80 layers, hidden 8192, 64 heads, seq 4096, vocab 32000, global batch 4096,
//    sequence parallel with selective recompute: most layouts with tp <= 8 fit, so most are placed.
//  - BM_Plan/gpt1t_full: 1T, 128 layers, hidden 25600, 160 heads, full recompute, ZeRO-1: the most layouts
//    that fit (and so the most placements) of the configurations in tests/fixtures/plan.
//  - BM_Plan/llama7b_full: 7B, 32 layers, hidden 4096, 32 heads, full recompute, ZeRO-1: nearly every
//    layout with tp <= 8 fits, the worst case for the number of placements.
//  - BM_Plan/llama70b_mesh: the 70B model on 910B3 with the interconnect of
//    device-plugin/topology/chips/atlas-800t-a2.yaml (7 HCCS links of 56 GB/s, a 25 GB/s NIC per chip): the
//    collective model (issue 29) prices every layout.
//  - BM_Calibrate/llama70b_mesh: plan --measured with three measured layouts of that plan: the plans of the
//    fit and the calibrated plan (about two plans: BM_Plan/llama70b_mesh is its floor).
// Counters: candidates listed, how many fit, distinct (tp, pp) placed, and the best layout's step time.
#include <benchmark/benchmark.h>

#include <set>

#include "ascend/topology/calibrate.h"
#include "ascend/topology/plan.h"

namespace {

using namespace ascend::topology;

PlanRequest llama70b() {
  PlanRequest r;
  r.npus = 4096;
  r.chip = "910B3";
  r.model = {70e9, 80, 8192, 64, 4096, 32000, 1, 4096};
  r.train.sequence_parallel = true;
  r.train.recompute = Recompute::kSelective;
  return r;
}

PlanRequest gpt1t_full() {
  PlanRequest r;
  r.npus = 4096;
  r.chip = "910B3";
  r.model = {1.0e12, 128, 25600, 160, 2048, 51200, 1, 4096};
  r.train.recompute = Recompute::kFull;
  r.train.optimizer_parallel = true;
  return r;
}

PlanRequest llama7b_full() {
  PlanRequest r;
  r.npus = 4096;
  r.chip = "910B3";
  r.model = {6.7e9, 32, 4096, 32, 4096, 32000, 1, 4096};
  r.train.recompute = Recompute::kFull;
  r.train.optimizer_parallel = true;
  return r;
}

PlanRequest llama70b_mesh() {
  PlanRequest r = llama70b();
  auto chip = builtin_chip("910B3");
  ChipSpec c = *chip;
  c.interconnect.domain = {true, 7, 56, 0, Fabric::kFullMesh};
  c.interconnect.nic = {true, 1, 25, 0, Fabric::kSwitch};
  r.chip_spec = c;
  return r;
}

void BM_Plan(benchmark::State& state, PlanRequest (*request)()) {
  PlanRequest req = request();
  PlanResult last;
  for (auto _ : state) {
    auto r = plan(req);
    if (!r.ok()) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    last = std::move(*r);
    benchmark::DoNotOptimize(last.entries.data());
  }
  int fits = 0;
  std::set<std::pair<int, int>> placed;
  for (const auto& e : last.entries) {
    if (!e.fits) continue;
    ++fits;
    placed.emplace(e.layout.tp, e.layout.pp);
  }
  state.counters["candidates"] = static_cast<double>(last.entries.size());
  state.counters["fit"] = fits;
  state.counters["placed_tp_pp"] = static_cast<double>(placed.size());
  if (fits > 0) state.counters["best_step_s"] = last.entries.front().time.total;
}
BENCHMARK_CAPTURE(BM_Plan, llama70b, llama70b)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, gpt1t_full, gpt1t_full)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, llama7b_full, llama7b_full)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, llama70b_mesh, llama70b_mesh)->Unit(benchmark::kMillisecond);

// Three layouts' step times, as a user would have measured them: the plan's own at efficiency 0.5, 10% slower
// communication.
void BM_Calibrate(benchmark::State& state) {
  PlanRequest req = llama70b_mesh();
  PlanRequest truth = req;
  truth.efficiency = 0.5;
  truth.comm_factor = 1.1;
  auto p = plan(truth);
  std::vector<Measurement> ms;
  std::set<std::pair<int, int>> seen;
  for (const auto& e : p->entries) {
    if (!e.fits || !seen.emplace(e.layout.tp, e.layout.pp).second) continue;
    ms.push_back({e.layout, 0, e.time.total, static_cast<int>(ms.size()) + 2});
    if (ms.size() == 3) break;
  }
  Calibration fit;
  for (auto _ : state) {
    auto c = calibrate(req, ms, "bench.csv");
    if (!c.ok()) {
      state.SkipWithError(c.error().message().c_str());
      return;
    }
    fit = c->fit;
    benchmark::DoNotOptimize(c->plan.entries.data());
  }
  state.counters["efficiency"] = fit.efficiency;
  state.counters["comm_factor"] = fit.comm_factor;
  state.counters["iterations"] = fit.iterations;
}
BENCHMARK(BM_Calibrate)->Name("BM_Calibrate/llama70b_mesh")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
